"""Ring attention behind sp.ring_attention / sp.ring_attention_grad: each rank holds one block of the
sequence (rank order, contiguous); the K/V blocks travel the ring at KV-head width while each rank
attends its queries to the block it holds, and the blocks' outputs are merged by their softmax
statistics (fp32). Under causal attention, with contiguous blocks a block after the rank's own is
skipped and the rank's own block is the causal diagonal; in zigzag order (collectives.py: rank i
holds chunks i and 2n - 1 - i) every step is half a block of work on every rank: an earlier rank's
block is attended by all this rank's queries but only through its early chunk, a later rank's block
only by this rank's late chunk, and the rank's own block is the causal diagonal of its two chunks.

The backward calls the same attention backward per block with the merged `out` and `lse`: that
gives each block's exact share of dq, dk and dv (the softmax of a row is normalized by its global
statistics). dk / dv accumulate in fp32 as they follow their K/V block around the ring, and the last
hop hands them to the rank that holds the block."""
from __future__ import annotations

import torch

from . import kernels

LSE_ALIGN_CUDA = 32   # the CUDA efficient-attention kernels keep the statistics padded to 32 rows
ALL = slice(None)


def _part(mesh, group: str, causal: bool, rows: int, j: int) -> tuple[slice, slice, bool] | None:
    """(query rows, key rows, causal) of this rank's queries against block j, or None: nothing."""
    i = mesh.index(group)
    if not causal:
        return ALL, ALL, False
    if j == i:
        return ALL, ALL, True
    if not mesh.zigzag(group):
        return (ALL, ALL, False) if j < i else None
    half = rows // 2
    return (ALL, slice(0, half), False) if j < i else (slice(half, rows), ALL, False)


def _rows(x: torch.Tensor, r: slice) -> torch.Tensor:
    return x[:, :, r]


def forward(mesh, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
            kv_groups: int, group: str) -> tuple[torch.Tensor, torch.Tensor]:
    n, i = mesh.size(group), mesh.index(group)
    rows = q.shape[2]
    out = lse = None
    kv = [k, v]
    for t in range(n):
        j = (i - t) % n   # the block this rank holds at step t (t = 0: its own, which every row attends)
        arriving = mesh.ring_pass(kv, "sp.ring_attention", group) if t + 1 < n else None
        part = _part(mesh, group, causal, rows, j)
        if part is not None:
            qs, ks, diagonal = part
            o, s = kernels.attention(_rows(q, qs), _rows(kv[0], ks), _rows(kv[1], ks), diagonal, scale, kv_groups)
            o, s = o.float(), s[..., :o.shape[2]].float()
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
             lse: torch.Tensor, causal: bool, scale: float, kv_groups: int,
             group: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, i = mesh.size(group), mesh.index(group)
    rows = q.shape[2]
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = [k, v]
    dkv = [torch.zeros(k.shape, dtype=torch.float32, device=k.device),
           torch.zeros(v.shape, dtype=torch.float32, device=v.device)]
    for t in range(n):
        j = (i - t) % n   # this rank holds block j's K/V and the dk / dv gathered for it so far
        arriving = mesh.ring_pass(kv, "sp.ring_attention_grad", group) if t + 1 < n else None
        part = _part(mesh, group, causal, rows, j)
        if part is not None:
            qs, ks, diagonal = part
            bq, bk, bv = kernels.attention_grad(
                _rows(dout, qs), _rows(q, qs), _rows(kv[0], ks), _rows(kv[1], ks), _rows(out, qs),
                _backend_lse(lse[..., qs], q), diagonal, scale, kv_groups)
            dq[:, :, qs] += bq
            dkv[0][:, :, ks] += bk
            dkv[1][:, :, ks] += bv
        if n > 1:   # on to the next holder of block j
            dkv = mesh.ring_pass(dkv, "sp.ring_attention_grad", group)()
        if arriving is not None:
            kv = arriving()
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


def _backend_lse(lse: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The statistics in the layout the backend's attention backward reads."""
    if not q.is_cuda:
        return lse.contiguous()
    rows = -(-lse.shape[-1] // LSE_ALIGN_CUDA) * LSE_ALIGN_CUDA
    return torch.nn.functional.pad(lse, (0, rows - lse.shape[-1]))
