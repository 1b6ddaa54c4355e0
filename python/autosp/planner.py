"""`autospc plan`: memory questions answered from the compiler's prediction alone.

The predicted per-rank peak is affine in the sequence length for a given model, batch, sp and
policy (every activation is linear in S/P; attention holds no S x S state), so two compiles at small
lengths give the whole line, and the longest S under a memory size follows.

Training also holds the optimizer's states through the step, and at the optimizer step the
parameters, every gradient and the states at once: `optimizers` adds them (AdamW: 2 states per
trainable parameter at its dtype, all of them on every rank, or with ZeRO-1 the largest shard
ZeroRedundancyOptimizer gives a rank of sp x dp). The optimizer's own temporaries inside its step
(foreach AdamW on CUDA: about one more parameter-sized set) are not counted."""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn as nn

from autosp.frontend import capture_train_step

POLICIES = ("none", "sac", "full")          # least recompute first
COMPONENTS = ("parameters", "inputs", "saved", "gradients", "transient", "comm")


@dataclass
class Fit:
    policy: str
    seq_len: int                      # longest that fits (a multiple of sp); 0 if none
    predicted_peak_bytes: int         # at seq_len, with the optimizer's states
    breakdown: dict[str, int]         # at seq_len
    limit: str                        # what dominates the peak there
    optimizer: str = ""               # a key of longest_sequence's `optimizers` ("": the step alone)

    def row(self) -> str:
        from autosp.units import human
        opt = f" {self.optimizer:9s} {human(self.breakdown['optimizer']):>10s}" if self.optimizer else ""
        return (f"{self.policy:6s}{opt} {self.seq_len:>10,d} {human(self.predicted_peak_bytes):>12s}   "
                f"limited by {self.limit}")


def optimizer_state_bytes(model: nn.Module, ranks: int = 1, states: int = 2) -> int:
    """Bytes of an Adam-style optimizer's states on the most loaded rank: `states` tensors per
    trainable parameter at its dtype, all on one rank, or sharded over `ranks` as
    ZeroRedundancyOptimizer partitions them (largest parameters first, each to the rank holding the
    fewest elements so far)."""
    elems, nbytes = [0] * ranks, [0] * ranks
    for p in sorted((p for p in model.parameters() if p.requires_grad), key=lambda t: t.numel(), reverse=True):
        r = elems.index(min(elems))
        elems[r] += p.numel()
        nbytes[r] += states * p.numel() * p.element_size()
    return max(nbytes)


def predicted_memory(model: nn.Module, batch: int, seq_len: int, sp: int, dp: int, policies, tile="auto") -> dict:
    """policy -> sp.memory of the compiled step at this length (one capture for all policies)."""
    from .compiler import Compilation, options, run_stages
    step = capture_train_step(model, batch, seq_len)
    memory = {}
    for p in policies:
        c = Compilation(batch, seq_len, options(sp, dp, p, None, tile).text(), p, step=step)
        memory[p] = run_stages(step, c, first="import").plan["memory"]
    return memory


def longest_sequence(model: nn.Module, sp: int, memory: int, batch: int = 1, dp: int = 1,
                     policies=POLICIES, granularity: int = 0, tile="auto",
                     optimizers: dict[str, int] | None = None) -> list[Fit]:
    """For each policy (and each optimizer: name -> per-rank bytes of its states; default the step
    alone), the longest sequence whose predicted per-rank peak fits `memory` bytes.

    The peak is the max over ops of affine functions of S, so a line through two short lengths can
    undershoot far away: fit once at 64g / 128g, then again at half and all of that first answer."""
    g = granularity or sp
    optimizers = optimizers or {"": 0}
    fits = _fit(model, sp, dp, memory, batch, policies, tile, g, 64 * g, 128 * g, optimizers)
    again = []
    for p in policies:
        hi = max(max(f.seq_len for f in fits if f.policy == p), 2 * g)
        again += _fit(model, sp, dp, memory, batch, (p,), tile, g, max(hi // 2 // g * g, g), hi, optimizers)
    return again + [_auto([f for f in again if f.optimizer == name]) for name in optimizers]


def _auto(fits: list[Fit]) -> Fit:
    """remat="auto" (with memory_budget=memory) tries none and every plan between the sac and full
    bases, full the leanest of them: it fits exactly as far as the longest named policy, whose plan it
    takes there; shorter sequences leave it room to recompute less."""
    best = max(fits, key=lambda f: (f.seq_len, -f.predicted_peak_bytes))
    return Fit("auto", best.seq_len, best.predicted_peak_bytes, best.breakdown,
               f"{best.limit} (there auto's plan is {best.policy})" if best.seq_len else best.limit, best.optimizer)


# the sides of a step, each affine in S: the forward, the backward, and the optimizer step (all the
# gradients at once); the peak is parameters + inputs + optimizer states + the largest side
SIDES = ("forward_peak_bytes", "backward_peak_bytes", "gradient_bytes")


def _fit(model, sp, dp, memory, batch, policies, tile, g, s1, s2, optimizers: dict[str, int]) -> list[Fit]:
    at1 = predicted_memory(model, batch, s1, sp, dp, policies, tile)
    at2 = predicted_memory(model, batch, s2, sp, dp, policies, tile)
    fits = []
    for p in policies:
        line = {k: _affine(at1[p].get(k, 0), at2[p].get(k, 0), s1, s2) for k in COMPONENTS + SIDES}
        for name, states in optimizers.items():
            base = (line["parameters"][0] + line["inputs"][0] + states, line["parameters"][1] + line["inputs"][1])
            s = min(_solve(memory, base, line[k], g) for k in SIDES)
            at = {k: int(c0 + c1 * s) for k, (c0, c1) in line.items()}
            at["optimizer"] = states
            peak = int(base[0] + base[1] * s + max(line[k][0] + line[k][1] * s for k in SIDES))
            limit = max(COMPONENTS + ("optimizer",), key=lambda k: at[k]) if s else \
                ("parameters + optimizer states" if states else "parameters") + " (nothing fits)"
            fits.append(Fit(p, s, peak, {k: at[k] for k in COMPONENTS + ("optimizer",)}, limit, name))
    return fits


def _solve(memory: int, base: tuple[float, float], side: tuple[float, float], g: int) -> int:
    """The largest multiple of g with base(S) + side(S) <= memory (0 if none)."""
    a, b = base[0] + side[0], base[1] + side[1]
    if b <= 0:
        return 10**12 if memory >= a else 0
    return max(int((memory - a) // b) // g * g, 0)


def _affine(y1: float, y2: float, x1: int, x2: int) -> tuple[float, float]:
    slope = (y2 - y1) / (x2 - x1)
    return y1 - slope * x1, slope
