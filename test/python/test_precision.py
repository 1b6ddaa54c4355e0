"""Mixed precision: compile(precision="bf16") runs the step as eager PyTorch runs it under
torch.autocast("cpu", dtype=torch.bfloat16), on fp32 parameters (master weights) with fp32 gradients.

bf16 keeps 8 bits of mantissa, so the compiled step and eager agree only up to bf16 rounding
(different op order, fused vs unfused kernels): the loss within 1e-2 relative and every gradient
with cosine similarity >= 0.999, over three AdamW steps (gradients compared at equal parameters).
The sharded steps (sp = 2, 4) run the same bf16 ops on fewer rows each, so their loss and the
direction of their gradients match the compiled sp = 1 step more tightly (SHARD_LOSS_TOL,
SHARD_MIN_COSINE; why not every gradient element: see there)."""
from __future__ import annotations

import contextlib

import pytest
import torch

import autosp
from autosp.frontend import load_model
from autosp.frontend.sources import vocab_size
from autosp.launch import spawn
from autosp.verify import batch_for, eager_loss
from conftest import spec_for

STEPS, LR = 3, 1e-3
LOSS_TOL, MIN_COSINE = 1e-2, 0.999
# sp = 2, 4 vs the compiled sp = 1 step: the same bf16 ops on each rank's rows, so at equal parameters
# the loss is the same up to fp32 summation order (measured: identical, or 1e-7 relative). A weight
# gradient is the fp32 sum of per-rank partial products, each rounded to bf16 by its matmul where
# sp = 1 rounds the full product once, so gradients differ by bf16 rounding (measured: cosine >=
# 0.99995, max |error| / max |gradient| <= 1.8e-2, no tighter than vs eager), and the AdamW
# trajectories drift apart by that much (measured loss <= 1.3e-4 relative at steps 2 and 3).
SHARD_LOSS_TOL, SHARD_MIN_COSINE = 1e-3, 0.9999


def _run(path: str, spec: str, pure_bf16: bool = False) -> list[dict]:
    """On one rank: STEPS AdamW steps of the compiled module from load_model(spec, seed=0). Per step:
    its loss and gradients, eager's (autocast) gradients at the same parameters, and the loss of an
    eager trajectory with its own AdamW."""
    m = autosp.load(path)
    ref, probe = (_bf16_llama(spec) if pure_bf16 else load_model(spec, seed=0) for _ in range(2))
    m.load_state_dict(ref.state_dict())
    ids, labels = batch_for(vocab_size(ref), m.input_shape, seed=1, ignore_every=7)
    opt, ref_opt = torch.optim.AdamW(m.parameters(), lr=LR), torch.optim.AdamW(ref.parameters(), lr=LR)
    steps = []
    for _ in range(STEPS):
        probe.load_state_dict(m.state_dict())
        for model in (ref, probe):
            model.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = eager_loss(model, ids, labels)
            loss.backward()
            if model is ref:
                ref_loss = loss.item()
        m.zero_grad()
        got = m(ids, labels)
        got.backward()
        probe_params = dict(probe.named_parameters())
        steps.append({"loss": got.item(), "eager_loss": ref_loss,
                      "grads": {n: p.grad.clone() for n, p in m.named_parameters()},
                      "eager_grads": {n: probe_params[n].grad.clone() for n, _ in m.named_parameters()}})
        opt.step()
        ref_opt.step()
    return steps


def _run_saved(path: str, spec: str, pure_bf16: bool = False) -> None:
    """_run on a spawned rank; rank 0 writes the result next to the artifact (the spawn queue is a
    pipe its reader drains only after the ranks exit, too small for gradients)."""
    steps = _run(path, spec, pure_bf16)
    if torch.distributed.get_rank() == 0:
        torch.save(steps, path + ".pt")


def _bf16_llama(spec: str, empty: bool = False) -> torch.nn.Module:
    """The HF config of `spec` built with bf16 parameters, as from_config(cfg, dtype=torch.bfloat16)."""
    import transformers
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.from_pretrained(spec.removeprefix("hf:"))
    with autosp.empty_weights() if empty else contextlib.nullcontext():
        return transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16, attn_implementation="sdpa")


def _compile(model: torch.nn.Module, spec: str, sp: int, tmp: str) -> str:
    ids = torch.zeros(2, 16, dtype=torch.long)
    art = autosp.compile(model, (ids, ids), sp=sp, precision="bf16", model_name=spec)
    return art.save(f"{tmp}/sp{sp}.autosp")


def _cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.nn.functional.cosine_similarity(a.flatten().double(), b.flatten().double(), dim=0).item()


def _close(loss: float, want_loss: float, grads: dict, want_grads: dict, loss_tol: float, min_cosine: float) -> None:
    assert abs(loss - want_loss) <= loss_tol * abs(want_loss), f"loss {loss} vs {want_loss}"
    cos = sorted((_cosine(g, want_grads[n]), n) for n, g in grads.items())
    assert cos[0][0] >= min_cosine, f"gradient cosine similarities: {cos[:3]}"


@pytest.mark.parametrize("model", ["builtin:tiny-llama", "llama"])
def test_bf16_matches_autocast(model, hf_dir, tmp_path):
    spec = spec_for(model, hf_dir)
    runs = {1: _run(_compile(load_model(spec, empty=True), spec, 1, str(tmp_path)), spec)}
    for sp in (2, 4):
        path = _compile(load_model(spec, empty=True), spec, sp, str(tmp_path))
        spawn(sp, _run_saved, path, spec)
        runs[sp] = torch.load(path + ".pt")
    for step in runs[1]:
        _close(step["loss"], step["eager_loss"], step["grads"], step["eager_grads"], LOSS_TOL, MIN_COSINE)
    for sp in (2, 4):
        for one, many in zip(runs[1], runs[sp]):
            _close(many["loss"], one["loss"], many["grads"], one["grads"], SHARD_LOSS_TOL, SHARD_MIN_COSINE)


def test_pure_bf16_model_trains(hf_dir, tmp_path):
    """Parameters already bf16 (from_config(dtype=torch.bfloat16)): compiles at sp=2 and trains as eager does."""
    spec = spec_for("llama", hf_dir)
    path = _compile(_bf16_llama(spec, empty=True), spec, 2, str(tmp_path))
    spawn(2, _run_saved, path, spec, True)
    for step in torch.load(path + ".pt"):
        assert all(g.dtype == torch.bfloat16 for g in step["grads"].values())
        _close(step["loss"], step["eager_loss"], step["grads"], step["eager_grads"], LOSS_TOL, MIN_COSINE)


def test_bf16_ring_matches_autocast(hf_dir, tmp_path):
    """Ring attention in bf16 (3 ranks, 4 heads: auto takes the ring): each K/V block's output is a
    bf16 attention result merged in fp32, so the step agrees with eager up to bf16 rounding, as sp=1 does."""
    spec = spec_for("llama", hf_dir)
    ids = torch.zeros(2, 24, dtype=torch.long)
    path = autosp.compile(load_model(spec, empty=True), (ids, ids), sp=3, precision="bf16",
                          model_name=spec).save(f"{tmp_path}/ring.autosp")
    assert "sp.ring_attention" in open(f"{path}/program.json").read()
    spawn(3, _run_saved, path, spec)
    for step in torch.load(path + ".pt"):
        _close(step["loss"], step["eager_loss"], step["grads"], step["eager_grads"], LOSS_TOL, MIN_COSINE)
