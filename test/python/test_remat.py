"""sp-plan-remat: every policy is exact, and the policies save and recompute what they say."""
from __future__ import annotations

import json
import math
import os

import pytest
import torch

import autosp
from autosp.frontend import load_model
from autosp.runtime.artifact import DTYPES
from autosp.verify import verify
from conftest import spec_for

TOL = 1e-5


def _ok(reports) -> None:
    for r in reports:
        assert r.ok(TOL), (r.loss_rel_err, r.worst[:3])


@pytest.mark.parametrize("sp", [1, 2, 4])
@pytest.mark.parametrize("remat", ["none", "full"])
def test_policy_matches_eager(remat, sp, compile_to):
    _ok(verify(compile_to("builtin:tiny-llama", sp, seq=32, remat=remat), "builtin:tiny-llama", sp, steps=3))


@pytest.mark.parametrize("remat", ["none", "full"])
@pytest.mark.parametrize("model", ["llama", "mistral", "qwen2"])
def test_policy_matches_eager_hf(model, remat, hf_dir, compile_to):
    spec = spec_for(model, hf_dir)
    _ok(verify(compile_to(spec, 2, remat=remat), spec, 2, steps=2))


def _programs(path: str) -> tuple[dict, dict]:
    prog = json.load(open(os.path.join(path, "program.json")))["programs"]
    return prog["forward"], prog["backward"]


def _saved(fwd: dict) -> list[tuple[list[int], str]]:
    """(shape, dtype) of every value the forward saves for the backward."""
    made = {r: (s, d) for inst in fwd["instructions"] for r, s, d in zip(inst["out"], inst["shapes"], inst["dtypes"])
            if s is not None}
    return [made[o] for o, name in zip(fwd["outputs"], fwd["results"]) if name.startswith("saved:") and o in made]


def _saved_bytes(fwd: dict) -> int:
    return sum(math.prod(s) * DTYPES[d].itemsize for s, d in _saved(fwd))


@pytest.mark.parametrize("model", ["llama", "gemma3", "gpt2"])
def test_full_saves_only_layer_boundaries(model, hf_dir, compile_to):
    """full saves the 2 layers' [B, S, D] inputs and the final norm's, the positions' cos / sin
    ([1, S, head_dim]), the labels and scalars, nothing else: every op is placed in its own layer.
    transformers runs apply_rotary_pos_emb as a module the model does not name (a kernelized
    function): its ops belong to the attention that calls it, else the rotated q and k are saved as
    values crossing a layer boundary; and GPT-2's first layer was once placed in wpe, its MLP in h.1."""
    fwd, _ = _programs(compile_to(spec_for(model, hf_dir), 1, remat="full"))
    shapes = [s for s, _ in _saved(fwd)]
    assert shapes.count([2, 16, 32]) == 3 and all(s in ([2, 16, 32], [1, 16, 8], [2, 16], []) for s in shapes), shapes


def test_policies_trade_memory_for_recompute(compile_to):
    progs = {r: _programs(compile_to("builtin:tiny-llama", 2, seq=64, remat=r)) for r in ("none", "sac", "full")}
    saved = {r: _saved_bytes(f) for r, (f, _) in progs.items()}
    assert saved["none"] > saved["sac"] > saved["full"] > 0, saved
    ops = {r: [i["op"] for i in b["instructions"]] for r, (_, b) in progs.items()}
    # sac keeps the attention outputs: no attention in its backward; full recomputes it
    assert ops["none"].count("sp.attention") == ops["sac"].count("sp.attention") == 0
    assert ops["full"].count("sp.attention") == 2
    # collectives are never recomputed: every policy's backward has the same ones
    for kind in ("sp.all_to_all", "sp.all_reduce"):
        assert ops["none"].count(kind) == ops["sac"].count(kind) == ops["full"].count(kind), kind
    # sac recomputes projections: more mm in its backward than none's
    assert ops["sac"].count("aten.mm.default") > ops["none"].count("aten.mm.default")


@pytest.mark.parametrize("sp", [1, 2, 4])
def test_auto_per_value_plan_matches_eager(sp, tmp_path):
    """remat="auto" between none and sac: a per-value plan (sac plus some values kept), still exact.
    At 256 tokens the activations set the peak, not the gradients' all-reduce bucket at the end of the
    backward (at 64, none and sac peak there alike)."""
    model = load_model("builtin:tiny-llama", empty=True)
    ids = torch.zeros(2, 256, dtype=torch.long)

    def compiled(remat: str, budget: int | None = None):
        art = autosp.compile(model, (ids, ids), sp=sp, remat=remat, memory_budget=budget, model_name="builtin:tiny-llama")
        return art, json.loads(art.files["plan.json"])

    peaks = [compiled(r)[1]["memory"]["predicted_peak_bytes"] for r in ("none", "sac")]
    art, plan = compiled("auto", sum(peaks) // 2)
    assert "+" in plan["auto"]["chosen"], plan["auto"]
    path = str(tmp_path / "auto.autosp")
    art.save(path)
    _ok(verify(path, "builtin:tiny-llama", sp, steps=2))
