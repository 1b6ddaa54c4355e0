"""The compiler's stages: capture -> import -> sp -> host -> codegen, each one's IR kept on request."""
from __future__ import annotations

import json
import os

import torch

import autosp
from autosp.compiler import STAGES
from autosp.frontend import load_model


def test_keep_ir_writes_one_file_per_stage(tmp_path):
    ids = torch.zeros(1, 8, dtype=torch.long)
    art = autosp.compile(load_model("py:models:one_layer_llama", empty=True), (ids, ids), sp=2, keep_ir=True)
    path = art.save(str(tmp_path / "m.autosp"))
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    assert manifest["stages"] == [name for name, *_ in STAGES] == ["capture", "import", "sp", "host", "codegen"]
    kept = sorted(f for f in manifest["files"] if f.startswith("ir/"))
    assert kept == ["ir/0-capture.py", "ir/1-import.mlir", "ir/2-sp.mlir", "ir/3-host.json", "ir/4-codegen.json"]
    ir = {f: open(os.path.join(path, f)).read() for f in kept}
    assert "torch.ops.aten.mm" in ir["ir/0-capture.py"]
    assert "func.func @train_step" in ir["ir/1-import.mlir"] and "\"sp.attention\"" not in ir["ir/1-import.mlir"]
    assert ir["ir/2-sp.mlir"] == art.mlir and "@backward" in ir["ir/2-sp.mlir"]
    assert json.loads(ir["ir/3-host.json"]) == art.program
    kernels = {n for p in art.program["programs"].values() for n in p["kernels"]}
    sources = json.loads(ir["ir/4-codegen.json"])   # each kernel's Triton source
    assert set(sources) == kernels and all("@triton.jit" in s for s in sources.values())
    assert manifest["pipeline"] == "sp-pipeline{sp=2}" and manifest["passes"][3] == "sp-partition-sequence{sp=2 dp=1 attention=auto}"
    assert set(art.timings) == {"capture", "import", "sp", "host", "codegen"}


def test_no_ir_kept_by_default(compile_to):
    files = json.load(open(os.path.join(compile_to("py:models:one_layer_llama", 1, batch=1, seq=8), "manifest.json")))
    assert not [f for f in files["files"] if f.startswith("ir/")]
