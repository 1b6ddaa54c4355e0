"""The Python API as users see it: names, state_dict, optimizers, the artifact's contents."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest
import torch

import autosp
from autosp.frontend import load_model
from autosp.runtime import packing
from autosp.verify import batch_for


@pytest.fixture(scope="module")
def art_path(tmp_path_factory):
    model = load_model("builtin:tiny-llama", empty=True)
    assert all(p.device.type == "meta" for p in model.parameters())   # compiling allocates no weights
    ids = torch.zeros(2, 16, dtype=torch.long)
    path = str(tmp_path_factory.mktemp("api") / "m.autosp")
    autosp.compile(model, example_inputs=(ids, ids), sp=1).save(path)
    return path


def test_state_dict_names_match_source(art_path):
    src = load_model("builtin:tiny-llama")
    m = autosp.load(art_path)
    assert list(m.state_dict()) == list(src.state_dict())
    m.load_state_dict(src.state_dict())     # strict
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), src.state_dict().values()))


@pytest.mark.in_process
def test_torch_save_roundtrip_and_sgd(art_path):
    src = load_model("builtin:tiny-llama")
    m = autosp.load(art_path)
    m.load_state_dict(src.state_dict())
    ids, labels = batch_for(256, [2, 16], seed=3)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    first = m(ids, labels)
    first.backward()
    opt.step()
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = autosp.load(art_path)
    m2.load_state_dict(torch.load(buf))
    after = m2(ids, labels)
    assert after.item() < first.item()
    # the same SGD step eagerly
    src_opt = torch.optim.SGD(src.parameters(), lr=0.1)
    src(ids, labels).backward()
    src_opt.step()
    assert abs(src(ids, labels).item() - after.item()) <= 1e-5 * abs(after.item())


@pytest.mark.in_process
def test_grad_accumulates_and_scales(art_path):
    m = autosp.load(art_path)
    m.load_state_dict(load_model("builtin:tiny-llama").state_dict())
    ids, labels = batch_for(256, [2, 16], seed=4)
    m(ids, labels).backward()
    g1 = {n: p.grad.clone() for n, p in m.named_parameters()}
    (m(ids, labels) * 0.5).backward()          # accumulates, scaled by the incoming gradient
    for n, p in m.named_parameters():
        torch.testing.assert_close(p.grad, 1.5 * g1[n], rtol=1e-6, atol=0)


@pytest.mark.in_process
def test_generated_code_computes_the_checked_runs_bits(art_path):
    """After the first, checked run, a program runs as generated straight-line code (executor._Straight):
    the same loss and gradients, bit for bit."""
    m = autosp.load(art_path)
    m.load_state_dict(load_model("builtin:tiny-llama").state_dict())
    ids, labels = batch_for(256, [2, 16], seed=5)
    runs = []
    for _ in range(2):
        m.zero_grad(set_to_none=True)
        loss = m(ids, labels)
        loss.backward()
        runs.append([loss.detach(), *(p.grad for p in m.parameters())])
    assert m.forward_program._straight is not None and m.backward_program._straight is not None
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.mark.in_process
def test_stacked_projections_share_one_storage(art_path):
    """sp-merge-projections stacks q / k / v and gate / up: the module keeps each group side by side in
    one storage, the parameters still separate tensors under their names, so the program's cat of
    them is a view (no copy, no memory). Once .to() has copied them apart, the next step puts them
    side by side again with their values, and computes the same loss."""
    src = load_model("builtin:tiny-llama")
    m = autosp.load(art_path)
    m.load_state_dict(src.state_dict())
    layers = sum(n.endswith("q_proj.weight") for n, _ in m.named_parameters())
    assert sorted(len(g) for g in m._packs) == [2] * layers + [3] * layers
    groups = [[m.get_parameter(n) for n in g] for g in m._packs]
    for g in groups:
        assert packing.adjacent(g)
        whole = packing.stacked(g)
        assert whole.data_ptr() == g[0].data_ptr() and torch.equal(whole, torch.cat(g))
    ids, labels = batch_for(256, [2, 16], seed=5)
    before = m(ids, labels).item()
    m._apply(lambda t: t.clone())            # what .to(device) does: each parameter its own storage
    assert not any(packing.adjacent(g) for g in groups)
    assert m(ids, labels).item() == before
    assert all(packing.adjacent(g) for g in groups)
    assert all(torch.equal(a, b) for a, b in zip(m.state_dict().values(), src.state_dict().values()))


def test_artifact_has_no_pickle_and_every_file_is_hashed(art_path):
    manifest = json.load(open(os.path.join(art_path, "manifest.json")))
    files = {os.path.relpath(os.path.join(r, f), art_path) for r, _, fs in os.walk(art_path) for f in fs}
    assert files - {"manifest.json"} == set(manifest["files"])
    for rel in files:
        data = open(os.path.join(art_path, rel), "rb").read()
        assert not data.startswith(b"\x80"), f"{rel} looks like a pickle"
        if rel.endswith(".json"):
            json.loads(data)
    assert manifest["format_version"] == 5 and manifest["layout"] == "autosp-dir-v1"
    assert {"program.json", "program.mlir", "params.json"} <= set(manifest["files"])


def test_runtime_imports_no_mlir(art_path):
    """A step runs with Triton not importable (torch itself imports it when it is installed, so the
    import is refused rather than looked for) and imports no compiler module."""
    code = ("import sys, importlib.abc\n"
            "class NoTriton(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'triton': raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, NoTriton())\n"
            "import torch; import autosp.runtime as r; m = r.load(sys.argv[1])\n"
            "m(torch.zeros(2, 16, dtype=torch.long), torch.zeros(2, 16, dtype=torch.long))\n"
            "bad = [k for k in sys.modules if k.startswith(('torch_mlir', 'autosp.passes', 'autosp.dialects', "
            "'autosp.frontend', 'autosp.lowering'))]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code, art_path], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_program_is_lowered_from_mlir(art_path):
    """Every collective and shape of the program is in the final MLIR the artifact carries."""
    art = autosp.runtime.artifact.read(art_path)
    mlir = art.read("program.mlir").decode()
    ops = [i["op"] for p in art.program["programs"].values() for i in p["instructions"]]
    assert ops.count("sp.attention") == mlir.count('"sp.attention"(') == 2       # sac keeps attention
    assert ops.count("sp.attention_grad") == mlir.count('"sp.attention_grad"(') == 2
    assert "sp.mesh = {dp = 1 : i64, sp = 1 : i64}" in mlir
