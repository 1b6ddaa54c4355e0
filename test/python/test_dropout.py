"""Dropout in the compiled step: never recomputed (none and sac bit-identical), an independent mask on
every rank's shard, and at sp=1 the masks eager PyTorch draws after the same torch.manual_seed."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import autosp
from autosp.frontend import load_model
from autosp.launch import spawn
from autosp.runtime import kernels
from autosp.runtime.executor import Program
from autosp.verify import batch_for
from conftest import HF_CONFIGS

SPEC = "py:models:dropout_model"
SEED = 1234
TOL = 1e-5


def _train(paths: list[str], spec: str, steps: int = 2) -> list[dict]:
    """Per artifact: loss and gradients of each of `steps` AdamW steps after torch.manual_seed(SEED),
    and the masks the first step drew (the runtime's dropout kernel wrapped to record them)."""
    draw = kernels.dropout
    masks: list[torch.Tensor] = []

    def record(x, p, train, generator):
        out, mask = draw(x, p, train, generator)
        masks.append(mask)
        return out, mask

    kernels.dropout = record
    try:
        return [_run(path, spec, steps, masks) for path in paths]
    finally:
        kernels.dropout = draw


def _run(path: str, spec: str, steps: int, masks: list[torch.Tensor]) -> dict:
    m = autosp.load(path)
    m.load_state_dict(load_model(spec).state_dict())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    torch.manual_seed(SEED)
    masks.clear()
    run: dict = {"loss": [], "grads": []}
    for step in range(steps):
        ids, labels = batch_for(64, m.input_shape, seed=step)
        m.zero_grad()
        loss = m(ids, labels)
        loss.backward()
        run["loss"].append(loss.detach())
        run.setdefault("params", []).append({n: p.detach().clone() for n, p in m.named_parameters()})
        run["grads"].append({n: p.grad.clone() for n, p in m.named_parameters()})
        if step == 0:
            run["masks"] = list(masks)
        opt.step()
    return run


def _differences(a: dict, b: dict) -> list[str]:
    """Where two runs' losses and gradients are not bit-identical."""
    out = [f"step {i}: loss {la.item()} != {lb.item()}" for i, (la, lb) in enumerate(zip(a["loss"], b["loss"]))
           if not torch.equal(la, lb)]
    for i, (ga, gb) in enumerate(zip(a["grads"], b["grads"])):
        out += [f"step {i}: grad {n} differs by {(g - gb[n]).abs().max().item()}" for n, g in ga.items()
                if not torch.equal(g, gb[n])]
    return out


def _none_vs_sac(paths: list[str], spec: str) -> tuple[list[str], float, list[tuple[tuple, bytes]]]:
    """On a rank: the differences between the two artifacts' runs, the first one's drop rate and its
    masks as (shape, bytes) (small, plain values: a spawned rank's result goes through a pipe the
    parent reads only after the ranks exit)."""
    none, sac = _train(paths, spec)
    return _differences(none, sac), _drop_rate(none["masks"]), \
        [(tuple(m.shape), m.numpy().tobytes()) for m in none["masks"]]


def _drop_rate(masks: list[torch.Tensor]) -> float:
    return 1 - sum(m.sum().item() for m in masks) / sum(m.numel() for m in masks)


@pytest.mark.in_process
def test_sp1_none_sac_identical_and_matches_eager(compile_to):
    none, sac = _train([compile_to(SPEC, 1, remat="none"), compile_to(SPEC, 1, remat="sac")], SPEC)
    assert not _differences(none, sac)
    assert len(none["masks"]) == 5 and 0.05 < _drop_rate(none["masks"]) < 0.15
    # eager with the same seed draws the same masks in the same order. It runs each step at the compiled
    # run's parameters (Adam's normalized first step turns rounding in near-zero gradients into
    # parameter differences of order lr), and agrees to fp32 reduction order, not bits: the compiled
    # step may sum in other groupings (a tiled MLP or LM head) and the blocking of both follows the thread
    # count, hence the suite's 1e-5 (see test_numerics), far below what another mask would move
    model = load_model(SPEC)
    params = dict(model.named_parameters())
    torch.manual_seed(SEED)
    for step in range(2):
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(none["params"][step][name])
        model.zero_grad()
        loss = model(*batch_for(64, [2, 16], seed=step))
        loss.backward()
        assert abs(loss.item() - none["loss"][step].item()) <= TOL * abs(loss.item()), step
        for name, p in params.items():
            err = (p.grad - none["grads"][step][name]).abs().max() / p.grad.abs().max()
            assert err <= TOL, (step, name, err.item())


def test_sp2_none_sac_identical_and_masks_per_shard(compile_to):
    ranks = spawn(2, _none_vs_sac, [compile_to(SPEC, 2, remat="none"), compile_to(SPEC, 2, remat="sac")], SPEC)
    assert [diff for diff, _, _ in ranks] == [[], []]
    for _, rate, _ in ranks:
        assert 0.05 < rate < 0.15, rate
    masks = [m for _, _, m in ranks]
    assert len(masks[0]) == len(masks[1]) == 5
    for (shape_a, a), (shape_b, b) in zip(*masks):   # each rank's own shard of every mask, drawn independently
        assert shape_a == shape_b == (2, 8, 32) and a != b


def test_seed_per_rank():
    """rank 0 draws as the default generator after torch.manual_seed(s); every global rank (sp and
    dp alike) draws a different stream; the same seed reproduces them."""
    def draws(rank: int) -> torch.Tensor:
        torch.manual_seed(SEED)
        return torch.rand(64, generator=Program({"instructions": []}, SimpleNamespace(rank=rank))._generator())

    torch.manual_seed(SEED)
    assert torch.equal(draws(0), torch.rand(64))
    per_rank = [draws(r) for r in range(4)]
    assert all(not torch.equal(per_rank[i], per_rank[j]) for i in range(4) for j in range(i))
    assert torch.equal(per_rank[3], draws(3))


def test_phi3_resid_dropout_sp2(compile_to, tmp_path):
    d = tmp_path / "phi3-dropout"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(dict(HF_CONFIGS["phi3"], resid_pdrop=0.1)))
    spec = f"hf:{d}"
    for diff, rate, masks in spawn(2, _none_vs_sac, [compile_to(spec, 2, remat="none"),
                                                     compile_to(spec, 2, remat="sac")], spec):
        assert not diff
        assert len(masks) == 4 and 0.05 < rate < 0.15   # 2 layers x 2 residual branches


@pytest.mark.parametrize("remat", ["none", "sac", "full"])
def test_dropout_is_saved_not_recomputed(remat, compile_to):
    prog = json.load(open(f"{compile_to(SPEC, 2, remat=remat)}/program.json"))["programs"]
    fwd, bwd = prog["forward"], prog["backward"]
    assert not any(i["op"] == "aten.native_dropout.default" for i in bwd["instructions"])
    masks = {i["out"][1] for i in fwd["instructions"] if i["op"] == "aten.native_dropout.default"}
    saved = {o for o, name in zip(fwd["outputs"], fwd["results"]) if name.startswith("saved:")}
    assert len(masks) == 5 and masks <= saved
