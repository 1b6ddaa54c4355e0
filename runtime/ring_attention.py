"""Ring attention behind sp.ring_attention / sp.ring_attention_grad: each rank holds one block of the
sequence (rank order, contiguous); the K/V blocks travel the ring at KV-head width while each rank
attends its queries to the block it holds, and the blocks' outputs are merged by their softmax
statistics (fp32). Under causal attention a block after the rank's own is skipped, and the rank's
own block is the causal diagonal.

The backward calls the same attention backward per block with the merged `out` and `lse`: that
gives each block's exact share of dq, dk and dv (the softmax of a row is normalized by its global
statistics). dk / dv accumulate in fp32 as they follow their K/V block around the ring, and the last
hop hands them to the rank that holds the block."""
from __future__ import annotations

import torch

from . import kernels

LSE_ALIGN_CUDA = 32   # the CUDA efficient-attention kernels keep the statistics padded to 32 rows


def _attends(causal: bool, rank: int, block: int) -> bool:
    return not causal or block <= rank


def forward(mesh, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
            kv_groups: int, group: str) -> tuple[torch.Tensor, torch.Tensor]:
    n, i = mesh.size(group), mesh.index(group)
    rows = q.shape[2]
    out = lse = None
    kv = [k, v]
    for t in range(n):
        j = (i - t) % n   # the block this rank holds at step t
        arriving = mesh.ring_pass(kv, "sp.ring_attention", group) if t + 1 < n else None
        if _attends(causal, i, j):
            o, s = kernels.attention(q, kv[0], kv[1], causal and j == i, scale, kv_groups)
            o, s = o.float(), s[..., :rows].float()
            if out is None:
                out, lse = o, s
            else:
                merged = torch.logaddexp(lse, s)
                out = out * (lse - merged).exp().unsqueeze(-1) + o * (s - merged).exp().unsqueeze(-1)
                lse = merged
        if arriving is not None:
            kv = arriving()
    return out.to(q.dtype), lse


def backward(mesh, dout: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
             lse: torch.Tensor, causal: bool, scale: float, kv_groups: int,
             group: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n, i = mesh.size(group), mesh.index(group)
    state = _backend_lse(lse, q)
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)
    kv = [k, v]
    dkv = [torch.zeros(k.shape, dtype=torch.float32, device=k.device),
           torch.zeros(v.shape, dtype=torch.float32, device=v.device)]
    for t in range(n):
        j = (i - t) % n   # this rank holds block j's K/V and the dk / dv gathered for it so far
        arriving = mesh.ring_pass(kv, "sp.ring_attention_grad", group) if t + 1 < n else None
        if _attends(causal, i, j):
            bq, bk, bv = kernels.attention_grad(dout, q, kv[0], kv[1], out, state, causal and j == i, scale,
                                                kv_groups)
            dq += bq
            dkv = [dkv[0] + bk, dkv[1] + bv]
        if n > 1:   # on to the next holder of block j
            dkv = mesh.ring_pass(dkv, "sp.ring_attention_grad", group)()
        if arriving is not None:
            kv = arriving()
    return dq.to(q.dtype), dkv[0].to(k.dtype), dkv[1].to(v.dtype)


def _backend_lse(lse: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The statistics in the layout the backend's attention backward reads."""
    if not q.is_cuda:
        return lse
    rows = -(-lse.shape[-1] // LSE_ALIGN_CUDA) * LSE_ALIGN_CUDA
    return torch.nn.functional.pad(lse, (0, rows - lse.shape[-1]))
