"""sp-tile-sequence: the LM head + loss and the MLPs in token chunks are exact, and no [tokens, vocab]
or [tokens, intermediate] tensor is left in the compiled forward or backward."""
from __future__ import annotations

import json
import math
import os

import pytest
import torch

from autosp.verify import verify
from conftest import spec_for

TOL = 1e-5
BATCH, SEQ, CHUNKS = 2, 64, 4
TINY = "builtin:tiny-llama"
TINY_F = 128                     # tiny-llama's intermediate size


def _ok(reports) -> None:
    for r in reports:
        assert r.ok(TOL), (r.loss_rel_err, r.worst[:3])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """compiled(spec, sp, tile=4, seq=64, remat="sac", pipeline=None) -> saved artifact path (cached
    per module)."""
    import autosp
    from autosp.frontend import load_model
    cache: dict[tuple, str] = {}

    def run(spec: str, sp: int, tile=CHUNKS, seq: int = SEQ, remat: str = "sac", pipeline: str | None = None) -> str:
        key = (spec, sp, tile, seq, remat, pipeline)
        if key not in cache:
            path = str(tmp_path_factory.mktemp("tile") / "m.autosp")
            ids = torch.zeros(BATCH, seq, dtype=torch.long)
            autosp.compile(load_model(spec, empty=True), (ids, ids), sp=sp, remat=remat, tile=tile,
                           model_name=spec, pipeline=pipeline).save(path)
            cache[key] = path
        return cache[key]
    return run


def _programs(path: str) -> dict:
    return json.load(open(os.path.join(path, "program.json")))["programs"]


def _instructions(prog: dict) -> list[dict]:
    """A program's instructions and those of the kernels it calls (sp-fuse), which run as ATen ops."""
    return prog["instructions"] + [i for k in prog.get("kernels", {}).values() for i in k["instructions"]]


def _head(path: str) -> tuple[int, int]:
    """(vocab, hidden) from the lm_head weight [V, D] (or the tied embedding)."""
    params = json.load(open(os.path.join(path, "params.json")))["parameters"]
    name = "lm_head.weight" if "lm_head.weight" in params else "model.embed_tokens.weight"
    v, d = params[name]["shape"]
    return v, d


def _stacks(prog: dict, width: int) -> set[int]:
    """Registers of a cat of pieces narrower than `width` that happens to be as wide (q / k / v's
    gradients stacked for one matmul, sp-merge-projections) and of views of it: not an activation."""
    shapes = {r: s for i in prog["instructions"] for r, s in zip(i["out"], i["shapes"])}
    out: set[int] = set()
    for i in prog["instructions"]:
        x = i["args"][0] if i["args"] else {}
        if i["op"] == "aten.cat.default" and all(shapes.get(e.get("r"), [width])[-1] < width for e in x["l"]):
            out.update(i["out"])
        elif x.get("r") in out and i["op"] in ("aten.t.default", "aten.view.default"):
            out.update(i["out"])
    return out


def _rows(path: str, width: int) -> list[tuple[str, int, list[int]]]:
    """(program, rows, shape) of every tensor an instruction produces or a program receives that has a
    dim of `width`, except the weight-shaped [width, D] / [D, width] ones and stacks (`_stacks`);
    rows = elements / width."""
    _, d = _head(path)
    out = []
    for name, prog in _programs(path).items():
        stacks = _stacks(prog, width)
        shapes = [a["shape"] for a in prog["args"]] + [s for i in prog["instructions"] if not set(i["out"]) & stacks
                                                       for s in i["shapes"]]
        for s in shapes:
            if s is not None and width in s and sorted(s) != sorted([width, d]):
                out.append((name, math.prod(s) // width, s))
    return out


def _vocab_rows(path: str) -> list[tuple[str, int, list[int]]]:
    return _rows(path, _head(path)[0])


def _log_softmax_shapes(path: str) -> dict[str, list[list[int]]]:
    """Per program, the shapes of its log-softmaxes in program order, those inside kernels (the loss
    backward's recompute) included."""
    def ops(p: dict, insts: list[dict]) -> list[dict]:
        return [j for i in insts for j in (ops(p, p["kernels"][i["attrs"]["name"]]["instructions"])
                                           if i["op"] == "sp.kernel" else [i])]
    return {name: [i["shapes"][0] for i in ops(p, p["instructions"]) if i["op"] == "aten._log_softmax.default"]
            for name, p in _programs(path).items()}


def _mlp_rows(path: str, f: int) -> dict[str, int]:
    """Per program, the most token rows of a tensor with an intermediate-size dim F (weights aside)."""
    rows = _rows(path, f)
    return {name: max((r for n, r, _ in rows if n == name), default=0) for name in _programs(path)}


@pytest.mark.parametrize("sp", [1, 2])
def test_tiled_matches_eager(sp, compiled):
    path = compiled(TINY, sp)
    passes = json.load(open(os.path.join(path, "manifest.json")))["passes"]
    assert f"sp-tile-sequence{{chunks={CHUNKS}}}" in passes
    assert passes.index(f"sp-tile-sequence{{chunks={CHUNKS}}}") < passes.index("sp-plan-remat{policy=sac}")
    _ok(verify(path, TINY, sp, steps=2))


@pytest.mark.parametrize("sp", [1, 2])
def test_no_whole_logits(sp, compiled):
    path = compiled(TINY, sp)
    v, _ = _head(path)
    tokens = BATCH * SEQ // sp
    rows = _vocab_rows(path)
    assert rows, "no logits-shaped tensor at all"
    worst = max(rows, key=lambda r: r[1])
    assert worst[1] == tokens // CHUNKS, worst          # the largest is one [T/4, V] tile
    assert [tokens, v] not in [s for _, _, s in rows]
    # four chunks in the forward, four recomputed in the backward
    assert _log_softmax_shapes(path) == {"forward": [[tokens // CHUNKS, v]] * CHUNKS,
                                         "backward": [[tokens // CHUNKS, v]] * CHUNKS}
    _assert_no_saved_logits(path)


def _assert_no_saved_logits(path: str) -> None:
    v, d = _head(path)
    saved = [a["shape"] for a in _programs(path)["backward"]["args"] if a["role"] == "saved"]
    assert not [s for s in saved if v in s and sorted(s) != sorted([v, d])], saved


def test_untiled_has_whole_logits(compiled):
    """The check above is meaningful: without tiling the step holds [T, V] tensors."""
    path = compiled(TINY, 2, tile=None)
    v, _ = _head(path)
    assert max(r[1] for r in _vocab_rows(path)) == BATCH * SEQ // 2
    assert _log_softmax_shapes(path)["forward"] == [[BATCH * SEQ // 2, v]]
    assert _mlp_rows(path, TINY_F) == {"forward": BATCH * SEQ // 2, "backward": BATCH * SEQ // 2}


@pytest.mark.parametrize("sp", [1, 2])
def test_no_whole_mlp_activations(sp, compiled):
    """chunks=4 cuts each MLP too, along each sequence's positions: its [T, F] activations and their
    gradients exist only as [T/4, F] chunks (B sequences of S/4 positions), in both programs."""
    path = compiled(TINY, sp)
    tokens = BATCH * SEQ // sp
    assert _mlp_rows(path, TINY_F) == {"forward": tokens // CHUNKS, "backward": tokens // CHUNKS}
    silu = [i["shapes"][0] for i in _instructions(_programs(path)["forward"]) if i["op"] == "aten.silu.default"]
    assert silu == [[BATCH, SEQ // sp // CHUNKS, TINY_F]] * (2 * CHUNKS), silu     # 2 layers
    saved = [a["shape"] for a in _programs(path)["backward"]["args"] if a["role"] == "saved"]
    assert all(math.prod(s) // TINY_F <= tokens // CHUNKS for s in saved if TINY_F in s), saved


def test_chunks_keep_the_head_locations(compiled):
    """The chunk ops carry the locations of the ops they replace (sp-plan-remat reads them)."""
    whole, tiled = _programs(compiled(TINY, 2, tile=None)), _programs(compiled(TINY, 2))
    v, _ = _head(compiled(TINY, 2))

    def locs(progs, op):
        return {i["loc"] for p in progs.values() for i in p["instructions"]
                if i["op"] == op and i["shapes"][0] and i["shapes"][0][-1] == v}
    for op in ("aten.mm.default", "aten._log_softmax.default", "aten._log_softmax_backward_data.default"):
        assert locs(tiled, op) == locs(whole, op) != {""}, op
    mlir = open(os.path.join(compiled(TINY, 2), "program.mlir")).read()
    assert '"lm_head"(' in mlir


@pytest.mark.parametrize("remat", ["none", "full"])
def test_every_policy_is_exact_and_saves_no_logits(remat, compiled):
    path = compiled(TINY, 2, remat=remat)
    _assert_no_saved_logits(path)
    _ok(verify(path, TINY, 2, steps=1))


def test_uneven_chunks(compiled):
    """chunks=3 on 64 local tokens: balanced chunks of 22, 21, 21 rows."""
    path = compiled(TINY, 2, tile=3)
    v, _ = _head(path)
    assert _log_softmax_shapes(path)["forward"] == [[22, v], [21, v], [21, v]]
    _ok(verify(path, TINY, 2, steps=1))


@pytest.mark.parametrize("model,wide", [("llama", 64), ("qwen2", 64), ("gpt_neox", 64), ("phi3", 128)])
def test_auto_chunks_hf(model, wide, hf_dir, compiled):
    """Chunks chosen from the shapes, by the width rules alone (floor=0: these tiles are far below the
    default floor, which keeps them whole). Head: the smallest N with a [T/N, V] fp32 tile <= 2 x
    [T, D]: V = 96, D = 32 -> N = 2. MLP: the smallest N with a [T/N, F] chunk <= 2 x [T, D], F its
    widest value: F = 64 -> N = 4, chunks of 2 of the 8 local positions of each of the 2 sequences
    (Phi-3's fused gate/up product, F = 128, split in two: N = 8, clamped to 8 positions). Qwen2 ties
    the head to the embedding; GPT-NeoX's MLP is GELU with biases (their gradients are summed chunk by
    chunk)."""
    from autosp.passes import SpPipeline
    spec = spec_for(model, hf_dir)
    passes = ["sp-tile-sequence{floor=0}" if p == "sp-tile-sequence" else p for p in SpPipeline(sp=2).expand()]
    path = compiled(spec, 2, seq=16, pipeline=f"builtin.module({','.join(passes)})")
    assert "sp-tile-sequence{floor=0}" in json.load(open(os.path.join(path, "manifest.json")))["passes"]
    assert _log_softmax_shapes(path)["forward"] == [[8, 96], [8, 96]]
    rows = 16 // min(math.ceil(2 * wide / 32), 8)
    assert _mlp_rows(path, wide) == {"forward": rows, "backward": rows}
    _ok(verify(path, spec, 2, steps=2))


def test_chunk_rule_and_bounds():
    from autosp.passes.tiling import bounds
    assert bounds(8, 4) == [(0, 2), (2, 4), (4, 6), (6, 8)]
    assert bounds(8, 3) == [(0, 3), (3, 6), (6, 8)]
    assert bounds(5, 5) == [(i, i + 1) for i in range(5)]


def test_too_many_chunks_is_a_compile_error():
    import autosp
    from autosp.frontend import CompileError, load_model
    ids = torch.zeros(1, 8, dtype=torch.long)
    with pytest.raises(CompileError, match=r"chunks=9 exceeds the 8 token rows of the loss"):
        autosp.compile(load_model(TINY, empty=True), (ids, ids), sp=1, tile=9)


def test_a_budget_lowers_the_floor():
    """Under a memory budget the automatic chunks' floor is at most 1/64 of it, so a step that fits only
    tiled is not refused for the floor's sake: tiny-llama at [1, 512] on one rank peaks at 2.96 MiB at
    best whole (sac; its [512, 256] logits are 512 KiB, under the default 4 MiB floor), and fits 2.75
    MiB with the head and MLPs in chunks of the width rules."""
    import autosp
    from autosp.frontend import load_model
    ids = torch.zeros(1, 512, dtype=torch.long)
    art = autosp.compile(load_model(TINY, empty=True), (ids, ids), sp=1, remat="auto", memory_budget="2.75MiB")
    assert f"sp-tile-sequence{{floor={11 * 2**18 // 64}}}" in art.meta["passes"]
    assert [(t["kind"], t["chunks"]) for t in art.plan["tiled"]] == [("lm_head", 2), ("mlp", 4), ("mlp", 4)]
    assert art.plan["memory"]["predicted_peak_bytes"] <= 11 * 2**18
