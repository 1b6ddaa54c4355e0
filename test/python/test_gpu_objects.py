"""The fused kernels compiled ahead of time, on this CPU host, for every GPU target (compile only: no
GPU here): objects of the right machine and architecture in kernels/<arch>/, each listed in the
manifest with its sha256, launch metadata the runtime validates, `autospc inspect` listing them; and
the runtime's loader (runtime/gpu_kernels.py) dry: its argument packing and launch with a recording
backend, and the ATen fallback, said once, where no object matches the device."""
from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import struct

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.inspect_artifact import report
from autosp.runtime import ArtifactError
from autosp.runtime import gpu_kernels
from autosp.runtime.artifact import POINTER_TYPES, read, sha256

pytest.importorskip("triton")

# target -> (folder, extension, ELF e_machine, the architecture in the ELF flags' low byte)
TARGETS = {"cuda:90": ("sm_90", "cubin", 190, 90), "cuda:80": ("sm_80", "cubin", 190, 80),
           "hip:gfx942": ("gfx942", "hsaco", 224, 0x4C), "hip:gfx90a": ("gfx90a", "hsaco", 224, 0x3F)}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> str:
    """The smallest llama with every kind of kernel, compiled once for all four targets."""
    ids = torch.zeros(1, 8, dtype=torch.long)
    art = autosp.compile(load_model("py:models:one_layer_llama", empty=True), (ids, ids), targets=list(TARGETS))
    return art.save(str(tmp_path_factory.mktemp("gpu") / "m.autosp"))


def test_every_target_has_every_kernel(artifact):
    art = read(artifact)
    assert art.manifest["targets"] == ["host", *TARGETS]
    kernels = {n: k for p in art.program["programs"].values() for n, k in p["kernels"].items()}
    assert len(kernels) >= 10
    for target, (folder, ext, machine, arch) in TARGETS.items():
        launch = json.loads(art.read(f"kernels/{folder}/launch.json"))
        assert launch["target"] == target and launch["fallback"] == {}
        assert set(launch["kernels"]) == set(kernels)
        for name, entry in launch["kernels"].items():
            image = art.read(f"kernels/{folder}/{entry['object']}")
            assert image[:4] == b"\x7fELF" and entry["object"].endswith("." + ext)
            assert struct.unpack_from("<H", image, 18)[0] == machine, (target, name)
            assert struct.unpack_from("<I", image, 48)[0] & 0xFF == arch, (target, name)
            assert entry["warp_size"] == (32 if ext == "cubin" else 64)
            k = kernels[name]
            assert entry["arg_types"][:len(k["args"]) + len(k["results"])] == \
                [POINTER_TYPES[a["dtype"]] for a in k["args"] + k["results"]]
            assert entry["arg_types"][len(k["args"]) + len(k["results"]):] == ["i64"] * sum(max(len(a["shape"]) - 1, 0) for a in k["args"])
        # kernels of one body share an object
        assert len({e["object"] for e in launch["kernels"].values()}) < len(kernels)


def test_objects_listed_with_their_digest(artifact):
    manifest = json.load(open(os.path.join(artifact, "manifest.json")))
    objects = [f for f in manifest["files"] if f.startswith("kernels/")]
    assert {f.split("/")[1] for f in objects} == {folder for folder, *_ in TARGETS.values()}
    for rel in objects:
        data = open(os.path.join(artifact, rel), "rb").read()
        assert manifest["files"][rel] == {"sha256": sha256(data), "bytes": len(data)}


def _forged(artifact: str, tmp_path, **edits) -> str:
    """A copy of the artifact with JSON files edited (launch=kernels/sm_90/launch.json, program,
    manifest: name -> function of the document), signed again."""
    import shutil
    path = str(tmp_path / "copy.autosp")
    shutil.copytree(artifact, path)
    files = {"launch": "kernels/sm_90/launch.json", "program": "program.json"}
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    for key, rel in files.items():
        if key in edits:
            doc = json.load(open(os.path.join(path, rel)))
            edits[key](doc)
            data = json.dumps(doc).encode()
            open(os.path.join(path, rel), "wb").write(data)
            manifest["files"][rel] = {"sha256": sha256(data), "bytes": len(data)}
    edits.get("manifest", lambda m: None)(manifest)
    json.dump(manifest, open(os.path.join(path, "manifest.json"), "w"))
    return path


def test_forged_launch_refused(artifact, tmp_path):
    """A launch.json whose argument types do not fit the kernel is refused at load, signed or not."""
    name = sorted(json.loads(read(artifact).read("kernels/sm_90/launch.json"))["kernels"])[0]

    def drop_last(doc):
        doc["kernels"][name]["arg_types"] = doc["kernels"][name]["arg_types"][:-1]
    with pytest.raises(ArtifactError, match=rf"launch.json: kernels.{name}.arg_types: .* the kernel's operands, "
                                            "results and operands' strides are"):
        read(_forged(artifact, tmp_path, launch=drop_last))


def test_contiguous_objects_of_format_3_refused(artifact, tmp_path):
    """Kernel objects of format version 3 took contiguous copies of their inputs (pointers only):
    this runtime passes strides, so it refuses them by version rather than launching them wrong."""
    def pointers_only(doc):
        for entry in doc["kernels"].values():
            entry["arg_types"] = [t for t in entry["arg_types"] if t != "i64"]

    def version_3(doc):
        doc["format_version"] = 3
    with pytest.raises(ArtifactError, match=r"launch.json: kernel objects of format version 3 take contiguous copies "
                                            r"of their inputs, this runtime passes strides \(version 4\): compile "
                                            r"the model again"):
        read(_forged(artifact, tmp_path, launch=pointers_only, program=version_3, manifest=version_3))


def test_inspect_lists_kernels_per_target(artifact):
    text = report(read(artifact))
    for target, (folder, *_) in TARGETS.items():
        assert any(line.split()[:1] == [target] and f"(kernels/{folder})" in line for line in text.splitlines()), text
    assert "launches per step" in text


@pytest.mark.parametrize("remat", ["none", "sac"])
def test_a_llama_layer_launches_a_third(remat):
    """Issue 12's goal: a Llama layer (the launches a second layer adds) takes at most a third of the
    launches of its ATen program, each fused kernel counted as the ATen ops it replaced (sp-fuse,
    sp-merge-projections; the MLP whole: tile=0)."""
    from autosp.inspect_artifact import kernels
    from models import TinyLlamaConfig, TinyLlamaForCausalLM

    ids = torch.zeros(1, 16, dtype=torch.long)
    counts = []
    for layers in (1, 2):
        with autosp.empty_weights():
            model = TinyLlamaForCausalLM(TinyLlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                                         num_hidden_layers=layers, num_attention_heads=2,
                                                         num_key_value_heads=1))
        k = kernels(autosp.compile(model, (ids, ids), remat=remat, tile=0).program)
        counts.append((k["launches"], k["aten_launches"]))
    fused, aten = counts[1][0] - counts[0][0], counts[1][1] - counts[0][1]
    assert aten >= 3 * fused, (fused, aten)


def test_unknown_target_refused():
    ids = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(CompileError, match=r"unknown target 'cuda:70' \(targets: cuda:90, cuda:80, hip:gfx942, "
                                           r"hip:gfx90a\)"):
        autosp.compile(load_model("py:models:one_layer_llama", empty=True), (ids, ids), targets=["cuda:70"])


def test_cli_targets_option():
    from autosp.cli.autospc import _parser
    a = _parser().parse_args(["compile", "builtin:tiny-llama", "--seq-len", "8", "-o", "m", "--targets",
                              "cuda:90,hip:gfx942"])
    assert a.targets == ("cuda:90", "hip:gfx942")
    with pytest.raises(SystemExit):
        _parser().parse_args(["compile", "builtin:tiny-llama", "--seq-len", "8", "-o", "m", "--targets", "sm_90"])


def _values(params: ctypes.Array) -> list[int]:
    return [ctypes.cast(params[i], ctypes.POINTER(ctypes.c_uint64))[0] for i in range(len(params))]


def test_pack_pointers_strides_then_scratch():
    keep, params = gpu_kernels.pack(["*fp32", "*bf16", "*fp32", "i64", "i64"],
                                    [0x7F0000001000, 0x7F0000002000, 0x7F0000003000, 64, 1], (0x7F0000004000, 0))
    assert _values(params) == [0x7F0000001000, 0x7F0000002000, 0x7F0000003000, 64, 1, 0x7F0000004000, 0]
    with pytest.raises(ValueError, match=r"takes 2 pointers and strides"):
        gpu_kernels.pack(["*fp32", "*fp32"], [1], (0, 0))
    with pytest.raises(ValueError, match=r"takes 1 pointers and strides \(\['i32'\]\)"):
        gpu_kernels.pack(["i32"], [1], (0, 0))


class Recorder:
    """A backend that records what it is asked to load and launch."""

    def __init__(self):
        self.loads, self.launches = [], []

    def load(self, image: bytes, symbol: str):
        self.loads.append((image[:4], symbol))
        return f"fn:{symbol}"

    def launch(self, fn, grid, block, shared, stream, params):
        self.launches.append((fn, grid, block, shared, stream, _values(params)))


def test_launch_dry(artifact, monkeypatch):
    """On a device the artifact has objects for (sm_90, faked on CPU tensors), a kernel launches its
    object: its inputs as they are, then torch-allocated outputs of its result shapes, then the
    inputs' strides, then two scratch pointers; block = num_warps x warp_size; torch's stream. Kernels sharing a body load it once."""
    art = read(artifact)
    recorder = Recorder()
    monkeypatch.setattr(gpu_kernels, "arch", lambda device: "sm_90")
    objects = gpu_kernels.GpuObjects(art, backend=lambda device: recorder, stream=lambda device: 7)
    launch = json.loads(art.read("kernels/sm_90/launch.json"))["kernels"]
    name = next(n for n, k in sorted(objects.kernels.items()) if sum(len(a["shape"]) >= 2 for a in k["args"]) >= 2
                and k["args"][0]["shape"][-1] > 1 and math.prod(k["args"][0]["shape"][:-1]) > 1)
    k = objects.kernels[name]
    launcher = objects.launcher(name, torch.device("cpu"))
    assert recorder.loads == [(b"\x7fELF", launch[name]["symbol"])]
    # a view with its rows apart is passed as it is, with its strides; one whose last dim is strided is copied
    inputs = [torch.randn(a["shape"][:-1] + [a["shape"][-1] + 3])[..., :a["shape"][-1]] if len(a["shape"]) >= 2
              else torch.randn(a["shape"]) for a in k["args"]]
    inputs[0] = torch.randn(inputs[0].shape[::-1]).permute(*reversed(range(inputs[0].dim())))
    assert inputs[0].stride(-1) != 1 and any(not x.is_contiguous() for x in inputs[1:])
    outs = launcher(*inputs)
    assert [list(o.shape) for o in outs] == [r["shape"] for r in k["results"]]
    (fn, grid, block, shared, stream, values), = recorder.launches
    e = launch[name]
    assert (fn, grid, block, shared, stream) == (f"fn:{e['symbol']}", e["grid"], e["num_warps"] * 32, e["shared"], 7)
    copy = inputs[0].contiguous()
    assert values[1:] == [x.data_ptr() for x in inputs[1:]] + [o.data_ptr() for o in outs] + \
        [s for x in [copy, *inputs[1:]] for s in x.stride()[:-1]] + [0, 0]
    assert values[0] != inputs[0].data_ptr()
    shared_body = [n for n, e2 in launch.items() if e2["object"] == e["object"] and n != name]
    for other in shared_body:
        objects.launcher(other, torch.device("cpu"))
    assert len(recorder.loads) == 1


def test_launch_into_a_dying_operand(artifact, monkeypatch):
    """A result the plan writes into an operand (sp.in_place) is launched with that operand as its
    output: the same tensor back, its pointer among the outputs; an operand that cannot take it (not
    contiguous) leaves the result a new tensor."""
    art = read(artifact)
    recorder = Recorder()
    monkeypatch.setattr(gpu_kernels, "arch", lambda device: "sm_90")
    objects = gpu_kernels.GpuObjects(art, backend=lambda device: recorder, stream=lambda device: 7)
    name, k, d = next((n, k, i) for n, k in sorted(objects.kernels.items()) for i, a in enumerate(k["args"])
                      if (a["shape"], a["dtype"]) == (k["results"][0]["shape"], k["results"][0]["dtype"])
                      and a["shape"][-1] > 1)
    launcher = objects.launcher(name, torch.device("cpu"))
    into = [d] + [-1] * (len(k["results"]) - 1)
    inputs = [torch.randn(a["shape"]) for a in k["args"]]
    outs = launcher(*inputs, into=into)
    pointers = recorder.launches[-1][-1][len(inputs):len(inputs) + len(outs)]
    assert outs[0] is inputs[d] and pointers[0] == inputs[d].data_ptr()
    inputs[d] = torch.randn([*k["args"][d]["shape"], 2])[..., 0]
    outs = launcher(*inputs, into=into)
    assert not inputs[d].is_contiguous() and outs[0] is not inputs[d] and outs[0].is_contiguous()


def test_fallback_said_once(artifact, caplog):
    """On the CPU the kernels run as their ATen ops, said once for the whole step, and the step is
    the model's."""
    torch.manual_seed(0)
    model = load_model("py:models:one_layer_llama")
    m = autosp.load(artifact)
    m.load_state_dict(model.state_dict())
    ids = torch.randint(0, 32, m.input_shape)
    with caplog.at_level(logging.WARNING, logger="autosp"):
        loss = m(ids, ids)
        loss.backward()
        m(ids, ids).backward()
    said = [r.getMessage() for r in caplog.records if r.name == "autosp"]
    assert said == [f"autosp: {artifact} has GPU kernels for gfx90a, gfx942, sm_80, sm_90, none for cpu: the fused "
                    "kernels run as the ATen ops they replaced"]
    eager = model(ids, ids)
    eager.backward()
    assert torch.allclose(loss, eager, rtol=1e-5, atol=0)
    eager_grads = dict(model.named_parameters())
    for name, p in m.named_parameters():   # two steps accumulated
        assert torch.allclose(p.grad, 2 * eager_grads[name].grad, rtol=1e-5, atol=1e-7), name
