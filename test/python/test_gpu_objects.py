"""The fused kernels compiled ahead of time, on this CPU host, for every GPU target (compile only: no
GPU here): objects of the right machine and architecture in kernels/<arch>/, each listed in the
manifest with its sha256, launch metadata the runtime validates, and `autospc inspect` listing them."""
from __future__ import annotations

import json
import os
import struct

import pytest
import torch

import autosp
from autosp.frontend import CompileError, load_model
from autosp.inspect_artifact import report
from autosp.runtime import ArtifactError
from autosp.runtime.artifact import read, sha256

pytest.importorskip("triton")

# target -> (folder, extension, ELF e_machine, the architecture in the ELF flags' low byte)
TARGETS = {"cuda:90": ("sm_90", "cubin", 190, 90), "cuda:80": ("sm_80", "cubin", 190, 80),
           "hip:gfx942": ("gfx942", "hsaco", 224, 0x4C), "hip:gfx90a": ("gfx90a", "hsaco", 224, 0x3F)}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> str:
    """The smallest llama with every kind of kernel, compiled once for all four targets."""
    ids = torch.zeros(1, 8, dtype=torch.long)
    art = autosp.compile(load_model("py:models:one_layer_llama", empty=True), (ids, ids), sp=2,
                         targets=list(TARGETS))
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
            assert len(entry["arg_types"]) == len(k["args"]) + len(k["results"])
        # kernels of one body share an object
        assert len({e["object"] for e in launch["kernels"].values()}) < len(kernels)


def test_objects_listed_with_their_digest(artifact):
    manifest = json.load(open(os.path.join(artifact, "manifest.json")))
    objects = [f for f in manifest["files"] if f.startswith("kernels/")]
    assert {f.split("/")[1] for f in objects} == {folder for folder, *_ in TARGETS.values()}
    for rel in objects:
        data = open(os.path.join(artifact, rel), "rb").read()
        assert manifest["files"][rel] == {"sha256": sha256(data), "bytes": len(data)}


def test_forged_launch_refused(artifact, tmp_path):
    """A launch.json whose argument types do not fit the kernel is refused at load, signed or not."""
    import shutil
    path = str(tmp_path / "copy.autosp")
    shutil.copytree(artifact, path)
    rel = "kernels/sm_90/launch.json"
    doc = json.load(open(os.path.join(path, rel)))
    name = sorted(doc["kernels"])[0]
    doc["kernels"][name]["arg_types"] = doc["kernels"][name]["arg_types"][:-1]
    data = json.dumps(doc).encode()
    open(os.path.join(path, rel), "wb").write(data)
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    manifest["files"][rel] = {"sha256": sha256(data), "bytes": len(data)}
    json.dump(manifest, open(os.path.join(path, "manifest.json"), "w"))
    with pytest.raises(ArtifactError, match=rf"launch.json: kernels.{name}.arg_types: .* the kernel's operands and "
                                            "results are"):
        read(path)


def test_inspect_lists_kernels_per_target(artifact):
    text = report(read(artifact))
    for target, (folder, *_) in TARGETS.items():
        assert any(line.split()[:1] == [target] and f"(kernels/{folder})" in line for line in text.splitlines()), text
    assert "launches per step" in text


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
