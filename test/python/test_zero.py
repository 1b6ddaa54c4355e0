"""ZeRO-1: ZeroRedundancyOptimizer over the compiled module trains as a plain AdamW does, and the
planner counts the optimizer states it leaves on a rank."""
from __future__ import annotations

import torch

import autosp
from autosp.frontend import load_model
from autosp.launch import spawn
from autosp.planner import optimizer_state_bytes
from autosp.train import optimizer
from autosp.verify import batch_for

SPEC = "builtin:tiny-llama"
STEPS = 3


def _state_bytes(opt: torch.optim.Optimizer) -> int:
    return sum(t.numel() * t.element_size() for st in opt.state.values() for t in st.values()
               if isinstance(t, torch.Tensor) and t.dim() > 0)   # AdamW's scalar step counts aside


def _adamw_vs_zero(path: str) -> dict:
    """On one rank: the same steps with AdamW and with ZeRO-1, each dp replica on its own batch."""
    src = load_model(SPEC, seed=0)
    plain, zero = autosp.load(path), autosp.load(path)
    plain.load_state_dict(src.state_dict())
    zero.load_state_dict(src.state_dict())
    opts = {"plain": optimizer(plain, 1e-2, zero=False), "zero": optimizer(zero, 1e-2, zero=True)}
    ids, labels = batch_for(256, plain.input_shape, seed=plain.mesh.index("dp"))
    losses: dict[str, list[float]] = {"plain": [], "zero": []}
    for _ in range(STEPS):
        for name, m in (("plain", plain), ("zero", zero)):
            loss = m(ids, labels)
            loss.backward()
            opts[name].step()
            opts[name].zero_grad()
            losses[name].append(loss.item())
    pairs = list(zip(plain.parameters(), zero.parameters()))
    return {"losses": losses,
            "param_diff": max((a - b).abs().max().item() for a, b in pairs),
            "moved": max((a - s).abs().max().item() for a, s in zip(plain.parameters(), src.parameters())),
            "plain_states": _state_bytes(opts["plain"]), "zero_states": _state_bytes(opts["zero"].optim)}


def test_zero_trains_as_adamw_sp2_dp2(compile_to):
    """sp=2 x dp=2, 4 gloo ranks. ZeroRedundancyOptimizer runs the same AdamW (the same single-tensor
    update per parameter) on each rank's shard of the parameters, from the same gradients (the
    compiled module reduces them over sp and dp), and broadcasts the result: the same arithmetic on
    the same values, so losses and parameters are bit-identical to plain AdamW, not merely close."""
    ranks = spawn(4, _adamw_vs_zero, compile_to(SPEC, sp=2, dp=2))
    for r in ranks:
        assert r["losses"]["zero"] == r["losses"]["plain"], r["losses"]
        assert r["param_diff"] == 0.0
        assert r["moved"] > 1e-3                    # the steps did train
        assert r["losses"]["plain"][-1] < r["losses"]["plain"][0]
    # the ranks of an SP group see the same loss; the two dp replicas train on different batches
    assert ranks[0]["losses"] == ranks[1]["losses"] and ranks[0]["losses"] != ranks[2]["losses"]
    # the states: all of them on every rank with AdamW, a shard with ZeRO-1, as the planner counts them
    model = load_model(SPEC, empty=True)
    assert all(r["plain_states"] == optimizer_state_bytes(model) for r in ranks)
    assert sum(r["zero_states"] for r in ranks) == optimizer_state_bytes(model)
    assert max(r["zero_states"] for r in ranks) == optimizer_state_bytes(model, ranks=4)
    assert optimizer_state_bytes(model, ranks=4) < optimizer_state_bytes(model) / 3
