"""How attention is sharded over sp ranks: u x r = sp, Ulysses over u (all-to-alls split the heads),
ring over r (K/V blocks passed around), chosen by the bytes each rank sends per attention layer.

The cost model counts, per rank and per attention (forward + backward), with Q the bytes of its local
q (and of out, dout, dq) and KV those of its local k (and of v, dk, dv) before any re-shard:
- Ulysses over u: each all-to-all sends (u - 1) / u of its operand: q, k, v, out forward, dout, dq,
  dk, dv backward. With fewer KV heads than u (u does not divide them) k and v are all-gathered
  instead ((u - 1) x KV each) and their gradients come back at query-head width.
- ring over r: each K/V block makes r - 1 hops forward and again backward, where the fp32 dk / dv
  make r hops.
Ties go to the larger u (fewer ring steps, each a rendezvous). Compute is balanced in every scheme
(Ulysses: whole heads; ring: zigzag chunks), and the memory of the attention inputs is the same.
"""
from __future__ import annotations

from dataclasses import dataclass

MODES = ("auto", "ulysses", "ring", "hybrid")


@dataclass(frozen=True)
class Scheme:
    ulysses: int   # u: ranks that split the heads by all-to-alls
    ring: int      # r: ranks that pass K/V blocks around

    def __str__(self) -> str:
        if self.ring == 1:
            return f"ulysses {self.ulysses}"
        return f"ring {self.ring}" if self.ulysses == 1 else f"hybrid {self.ulysses}x{self.ring}"


def bytes_sent(s: Scheme, heads: int, kv_heads: int, q: float, kv: float, itemsize: int) -> float:
    """Bytes one rank sends for one attention, forward + backward (see the module docstring)."""
    u, r = s.ulysses, s.ring
    total, ring_kv = 0.0, kv
    if u > 1:
        f = (u - 1) / u
        if kv_heads % u == 0:
            total += f * (4 * q + 4 * kv)
        else:   # K/V gathered whole and repeated to this rank's query heads
            total += f * 2 * q + 2 * (u - 1) * kv + f * 2 * q
            ring_kv = q
    if r > 1:
        total += 2 * (r - 1) * 2 * ring_kv + r * 2 * ring_kv * 4 / itemsize
    return total


def candidates(mode: str, sp: int, heads: list[int]) -> list[Scheme]:
    """The schemes `mode` allows: u divides sp and every attention's heads."""
    splits = [u for u in range(1, sp + 1) if sp % u == 0 and all(h % u == 0 for h in heads)]
    if mode == "ulysses":
        splits = [u for u in splits if u == sp]
    elif mode == "ring":
        splits = [1]
    elif mode == "hybrid":
        splits = [u for u in splits if 1 < u < sp]
    return [Scheme(u, sp // u) for u in splits]


def choose(options: list[Scheme], cost) -> Scheme:
    """The cheapest scheme; ties to the larger u."""
    return min(options, key=lambda s: (cost(s), -s.ulysses))
