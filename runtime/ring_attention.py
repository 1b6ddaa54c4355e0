"""Ring attention behind sp.ring_attention / sp.ring_attention_grad: each rank holds one block of the
sequence (rank order, contiguous); the K/V blocks travel the ring at KV-head width while each rank
attends its queries to the block it holds, and the blocks' outputs are merged by their softmax
statistics (fp32). Under a causal sliding window a block travels only as far as the queries that
reach it (artifact.ring_hops), and each rank attends the rows of a block its window reaches, with the
window as a mask. Under causal attention, with contiguous blocks a block after the rank's own is
skipped and the rank's own block is the causal diagonal; in zigzag order (collectives.py: rank i
holds chunks i and 2n - 1 - i) every step is half a block of work on every rank: an earlier rank's
block is attended by all this rank's queries but only through its early chunk, a later rank's block
only by this rank's late chunk, and the rank's own block is the causal diagonal of its two chunks.

The backward calls the same attention backward per block with the merged `out` and `lse`: that
gives each block's exact share of dq, dk and dv (the softmax of a row is normalized by its global
statistics). dk / dv accumulate in fp32 as they follow their K/V block around the ring, and the last
hop hands them to the rank that holds the block.

Packed documents (doc_pos, each query's position in its document) mask each block by its rows'
sequence positions; a query row that sees nothing of a block adds nothing to the merge."""
from __future__ import annotations

import torch

from . import kernels
from .artifact import ring_hops

ALL = slice(None)


def _part(mesh, group: str, causal: bool, window: int, rows: int,
          j: int) -> tuple[slice, slice, bool, int] | None:
    """(query rows, key rows, causal, position of the first query row minus the first key row's) of
    this rank's queries against block j, or None: nothing."""
    i = mesh.index(group)
    if not causal:
        return ALL, ALL, False, 0
    if j == i:
        return ALL, ALL, True, 0
    if not mesh.zigzag(group):
        if j > i:
            return None
        if not window:
            return ALL, ALL, False, 0
        # a window (contiguous blocks): row a reaches block j's last key iff (i - j) rows + a - (rows - 1)
        # < window, so the rows that see block j at all are a prefix
        d = (i - j) * rows
        seeing = min(rows, window - d + rows - 1)
        return (slice(0, seeing), ALL, True, d) if seeing > 0 else None
    half = rows // 2
    return (ALL, slice(0, half), False, 0) if j < i else (slice(half, rows), ALL, False, 0)


def _rows(x: torch.Tensor, r: slice) -> torch.Tensor:
    return x[:, :, r]


def _positions(mesh, group: str, rows: int, j: int, device: torch.device) -> torch.Tensor:
    """The sequence positions of block j's rows (in the ring's order)."""
    n = mesh.size(group)
    if not mesh.zigzag(group):
        return torch.arange(rows, device=device) + j * rows
    half = rows // 2
    return torch.cat([torch.arange(half, device=device) + j * half,
                      torch.arange(half, device=device) + (2 * n - 1 - j) * half])


def _documents(mesh, group: str, doc_pos: torch.Tensor | None, qs: slice, ks: slice, j: int,
               rows: int) -> dict:
    """The kernels' document arguments for this rank's query rows qs against block j's key rows ks."""
    if doc_pos is None:
        return {}
    dev = doc_pos.device
    return {"doc_pos": doc_pos[:, qs], "positions": (_positions(mesh, group, rows, mesh.index(group), dev)[qs],
                                                     _positions(mesh, group, rows, j, dev)[ks])}


def forward(mesh, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, doc_pos: torch.Tensor | None = None, *,
            causal: bool, scale: float, kv_groups: int, group: str,
            window: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    n, i = mesh.size(group), mesh.index(group)
    rows = q.shape[2]
    hops = ring_hops(n, rows, causal, window)
    out = lse = None
    kv = [k, v]
    for t in range(hops + 1):
        j = (i - t) % n   # the block this rank holds at step t (t = 0: its own, which every row attends)
        arriving = mesh.ring_pass(kv, "sp.ring_attention", group) if t < hops else None
        part = _part(mesh, group, causal, window, rows, j)
        if part is not None:
            qs, ks, diagonal, offset = part
            o, s = kernels.attention(_rows(q, qs), _rows(kv[0], ks), _rows(kv[1], ks), diagonal, scale, kv_groups,
                                     window, offset, **_documents(mesh, group, doc_pos, qs, ks, j, rows))
            o, s = o.float(), s.float()
            if out is None:
                out, lse = o, s
            else:
                mine = lse[..., qs]
                merged = torch.logaddexp(mine, s)
                out[:, :, qs] = _rows(out, qs) * (mine - merged).exp().unsqueeze(-1) + \
                    o * (s - merged).exp().unsqueeze(-1)
                lse[..., qs] = merged
        if arriving is not None:
            kv = arriving()
    return out.to(q.dtype), lse


def backward(mesh, dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
             lse: torch.Tensor, doc_pos: torch.Tensor | None = None, *, causal: bool, scale: float, kv_groups: int,
             group: str, window: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, i = mesh.size(group), mesh.index(group)
    rows = q.shape[2]
    hops = ring_hops(n, rows, causal, window)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = [k, v]
    dkv = [torch.zeros(k.shape, dtype=torch.float32, device=k.device),
           torch.zeros(v.shape, dtype=torch.float32, device=v.device)]
    for t in range(hops + 1):
        j = (i - t) % n   # this rank holds block j's K/V and the dk / dv gathered for it so far
        arriving = mesh.ring_pass(kv, "sp.ring_attention_grad", group) if t < hops else None
        part = _part(mesh, group, causal, window, rows, j)
        if part is not None:
            qs, ks, diagonal, offset = part
            bq, bk, bv = kernels.attention_grad(
                _rows(dout, qs), _rows(q, qs), _rows(kv[0], ks), _rows(kv[1], ks), _rows(out, qs),
                lse[..., qs], diagonal, scale, kv_groups, window, offset,
                **_documents(mesh, group, doc_pos, qs, ks, j, rows))
            dq[:, :, qs] += bq
            dkv[0][:, :, ks] += bk
            dkv[1][:, :, ks] += bv
        if hops:   # on to the next holder of block j; after the last step, back to its own rank
            dkv = mesh.ring_pass(dkv, "sp.ring_attention_grad", group, shift=1 if t < hops else -hops)()
        if arriving is not None:
            kv = arriving()
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)

