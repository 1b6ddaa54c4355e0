"""How a value is laid out across the sequence-parallel group.

rep        every rank holds the whole (global) value
partial    every rank holds a summand; the value is the sum over the group
seq<d,i>   dim d holds this rank's block of the sequence: dim d = outer x S x i (i = `inner`,
           the elements per token inside that dim, e.g. 1 for [B*S] and H for [B*S*H]); the local
           extent of d is its global extent / P
heads<d>   dim d holds this rank's block of attention heads (only between Ulysses all-to-alls)
halo<d,w>  a sequence padded by w at the end along d; only valid as the source of a label shift
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    kind: str
    dim: int = -1
    inner: int = 1

    def __str__(self) -> str:
        if self.kind in ("rep", "partial"):
            return self.kind
        if self.kind == "seq":
            return f"seq<{self.dim}>" if self.inner == 1 else f"seq<{self.dim},{self.inner}>"
        return f"{self.kind}<{self.dim},{self.inner}>" if self.kind == "halo" else f"{self.kind}<{self.dim}>"

    @staticmethod
    def parse(text: str) -> "Layout":
        m = re.fullmatch(r"(rep|partial)|(seq|heads|halo)<(\d+)(?:,(\d+))?>", text)
        if not m:
            raise ValueError(f"bad layout {text!r}")
        if m.group(1):
            return Layout(m.group(1))
        return Layout(m.group(2), int(m.group(3)), int(m.group(4) or 1))

    @property
    def sharded(self) -> bool:
        return self.kind in ("seq", "heads")


REP = Layout("rep")
PARTIAL = Layout("partial")


def seq(dim: int, inner: int = 1) -> Layout:
    return Layout("seq", dim, inner)


def local_shape(global_shape: list[int], layout: Layout, p: int) -> list[int]:
    """Per-rank shape of a value with this layout on a group of p ranks."""
    out = list(global_shape)
    if layout.sharded:
        if out[layout.dim] % p:
            raise ValueError(f"dim {layout.dim} of extent {out[layout.dim]} does not split over {p} ranks")
        out[layout.dim] //= p
    return out


def reshape_seq(in_shape: list[int], layout: Layout, out_shape: list[int], seq_len: int) -> Layout | None:
    """Where the sequence factor of `layout` lands after a reshape in_shape -> out_shape, or None
    when the reshape splits it across dims (then it cannot be done shard-locally)."""
    stride = layout.inner * math.prod(in_shape[layout.dim + 1:])  # element stride of the token index
    span = stride * seq_len
    acc = 1
    for e in reversed(range(len(out_shape))):
        lo, hi = acc, acc * out_shape[e]
        acc = hi
        if lo <= stride and span <= hi and stride % lo == 0 and hi % span == 0:
            return seq(e, stride // lo)
    return None
