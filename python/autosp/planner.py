"""`autospc plan`: memory questions answered from the compiler's prediction alone.

The predicted per-rank peak is affine in the sequence length for a given model, batch, sp and
policy (every activation is linear in S/P; attention holds no S x S state), so two compiles at small
lengths give the whole line, and the longest S under a memory size follows."""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn as nn

from autosp.frontend import CompileError, capture_train_step

POLICIES = ("none", "sac", "full")          # least recompute first
COMPONENTS = ("parameters", "inputs", "saved", "gradients", "transient", "comm")


@dataclass
class Fit:
    policy: str
    seq_len: int                      # longest that fits (a multiple of sp); 0 if none
    predicted_peak_bytes: int         # at seq_len
    breakdown: dict[str, int]         # at seq_len
    limit: str                        # what dominates the peak there

    def row(self) -> str:
        from autosp.inspect_artifact import human
        return (f"{self.policy:6s} {self.seq_len:>10,d} {human(self.predicted_peak_bytes):>12s}   "
                f"limited by {self.limit}")


def predicted_memory(model: nn.Module, batch: int, seq_len: int, sp: int, dp: int, policies, tile="auto") -> dict:
    """policy -> sp.memory of the compiled step at this length (one capture for all policies)."""
    from .compiler import lower_step
    step = capture_train_step(model, batch, seq_len)
    tile = int(tile) if isinstance(tile, str) and tile.isdigit() else tile
    return {p: lower_step(step, sp, dp, p, None, tile)[2]["memory"] for p in policies}


def longest_sequence(model: nn.Module, sp: int, memory: int, batch: int = 1, dp: int = 1,
                     policies=POLICIES, granularity: int = 0, tile="auto") -> list[Fit]:
    """For each policy, the longest sequence whose predicted per-rank peak fits `memory` bytes.

    The peak is the max over ops of affine functions of S, so a line through two short lengths can
    undershoot far away: fit once at 64g / 128g, then again at half and all of that first answer."""
    g = granularity or sp
    fits = _fit(model, sp, dp, memory, batch, policies, tile, g, 64 * g, 128 * g)
    again = []
    for f in fits:
        hi = max(f.seq_len, 2 * g)
        again.append(_fit(model, sp, dp, memory, batch, (f.policy,), tile, g, max(hi // 2 // g * g, g), hi)[0])
    return again + [_auto(again)]


def _auto(fits: list[Fit]) -> Fit:
    """remat="auto" (with memory_budget=memory) tries none and every plan between the sac and full
    bases, full the leanest of them: it fits exactly as far as the longest named policy, whose plan it
    takes there; shorter sequences leave it room to recompute less."""
    best = max(fits, key=lambda f: (f.seq_len, -f.predicted_peak_bytes))
    return Fit("auto", best.seq_len, best.predicted_peak_bytes, best.breakdown,
               f"{best.limit} (there auto's plan is {best.policy})" if best.seq_len else best.limit)


def _fit(model, sp, dp, memory, batch, policies, tile, g, s1, s2) -> list[Fit]:
    at1 = predicted_memory(model, batch, s1, sp, dp, policies, tile)
    at2 = predicted_memory(model, batch, s2, sp, dp, policies, tile)
    fits = []
    for p in policies:
        keys = COMPONENTS + ("predicted_peak_bytes", "forward_peak_bytes", "backward_peak_bytes")
        line = {k: _affine(at1[p].get(k, 0), at2[p].get(k, 0), s1, s2) for k in keys}
        # peak = parameters + inputs + max(forward peak, backward peak): each side is affine in S
        base = [x + y for x, y in zip(line["parameters"], line["inputs"])]
        s = min(_solve(memory, base, line[k], g) for k in ("forward_peak_bytes", "backward_peak_bytes"))
        at = {k: int(c0 + c1 * s) for k, (c0, c1) in line.items()}
        at["predicted_peak_bytes"] = int(base[0] + base[1] * s + max(
            line[k][0] + line[k][1] * s for k in ("forward_peak_bytes", "backward_peak_bytes")))
        limit = max(COMPONENTS, key=lambda k: at[k]) if s else "parameters (nothing fits)"
        fits.append(Fit(p, s, at["predicted_peak_bytes"], {k: at[k] for k in COMPONENTS}, limit))
    return fits


def _solve(memory: int, base: list[float], side: tuple[float, float], g: int) -> int:
    """The largest multiple of g with base(S) + side(S) <= memory (0 if none)."""
    a, b = base[0] + side[0], base[1] + side[1]
    if b <= 0:
        return 10**12 if memory >= a else 0
    return max(int((memory - a) // b) // g * g, 0)


def _affine(y1: float, y2: float, x1: int, x2: int) -> tuple[float, float]:
    slope = (y2 - y1) / (x2 - x1)
    return y1 - slope * x1, slope
