"""How attention is sharded over sp ranks: u x r = sp, Ulysses over u (all-to-alls split the heads),
ring over r (K/V blocks passed around), chosen by the bytes each rank sends per attention layer.

The cost model counts, per rank and per attention (forward + backward), with Q the bytes of its local
q (and of out, dout, dq) and KV those of its local k (and of v, dk, dv) before any re-shard:
- Ulysses over u: each all-to-all sends (u - 1) / u of its operand: q, k, v, out forward, dout, dq,
  dk, dv backward. When u does not divide the KV heads, each is repeated m = lcm(kv_heads, u) /
  kv_heads times first (k, v, dk, dv then move m x KV), so a rank receives only the KV heads its
  query heads read.
- ring over r: each K/V block makes r - 1 hops forward and again backward, where the fp32 dk / dv
  make r hops; under a causal sliding window h = ring_hops(...) <= r - 1 hops (the blocks the window
  reaches) and h + 1 for dk / dv.
Ties go to the larger u (fewer ring steps, each a rendezvous). Compute is balanced in every scheme
(Ulysses: whole heads; ring: zigzag chunks), and the memory of the attention inputs is the same.
"""
from __future__ import annotations

from dataclasses import dataclass

import math
import re

from autosp.runtime.artifact import ring_hops

MODES = ("auto", "ulysses", "ring", "hybrid")   # or "UxR": those degrees, forced (e.g. 2x4)
MODE_HELP = ("ulysses (heads split by all-to-alls), ring (K/V blocks passed around the ranks), hybrid (ulysses x "
             "ring), UxR (those degrees, e.g. 2x4), or auto: the one that sends the fewest bytes")


@dataclass(frozen=True)
class Scheme:
    ulysses: int   # u: ranks that split the heads by all-to-alls
    ring: int      # r: ranks that pass K/V blocks around

    def __str__(self) -> str:
        if self.ring == 1:
            return f"ulysses {self.ulysses}"
        return f"ring {self.ring}" if self.ulysses == 1 else f"hybrid {self.ulysses}x{self.ring}"


def bytes_sent(s: Scheme, kv_heads: int, q: float, kv: float, itemsize: int, seq_len: int, causal: bool,
               window: int) -> float:
    """Bytes one rank sends for one attention, forward + backward (see the module docstring)."""
    u, r = s.ulysses, s.ring
    total, ring_kv = 0.0, kv
    if u > 1:
        ring_kv = kv * math.lcm(kv_heads, u) // kv_heads   # KV heads repeated until u divides them
        total += (u - 1) / u * (4 * q + 4 * ring_kv)
    if r > 1:
        hops = ring_hops(r, seq_len // r, causal, window)
        total += 2 * hops * 2 * ring_kv + (hops + 1) * 2 * ring_kv * 4 / itemsize
    return total


def forced(mode: str) -> Scheme | None:
    """The scheme a "UxR" mode names (None for the named modes)."""
    m = re.fullmatch(r"([1-9][0-9]*)x([1-9][0-9]*)", mode)
    return Scheme(int(m[1]), int(m[2])) if m else None


def mode_error(mode: str, sp: int | None = None) -> str | None:
    """Why `mode` is no attention mode (at sp ranks, when given), or None."""
    if mode in MODES:
        return None
    if (f := forced(mode)) is None:
        return f"attention={mode!r} is not one of {', '.join(MODES)} or UxR (ulysses x ring degrees, e.g. 2x4)"
    if sp is not None and f.ulysses * f.ring != sp:
        return f"attention={mode}: ulysses x ring = {f.ulysses} x {f.ring} = {f.ulysses * f.ring}, not sp={sp}"
    return None


def candidates(mode: str, sp: int, heads: list[int]) -> list[Scheme]:
    """The schemes `mode` allows: u divides sp and every attention's heads."""
    splits = [u for u in range(1, sp + 1) if sp % u == 0 and all(h % u == 0 for h in heads)]
    if (f := forced(mode)) is not None:
        splits = [u for u in splits if (u, sp // u) == (f.ulysses, f.ring)]
    elif mode == "ulysses":
        splits = [u for u in splits if u == sp]
    elif mode == "ring":
        splits = [1]
    elif mode == "hybrid":
        splits = [u for u in splits if 1 < u < sp]
    return [Scheme(u, sp // u) for u in splits]


def choose(options: list[Scheme], cost) -> Scheme:
    """The cheapest scheme; ties to the larger u."""
    return min(options, key=lambda s: (cost(s), -s.ulysses))
