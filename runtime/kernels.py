"""Attention kernels behind sp.attention / sp.attention_grad: ATen's fused SDPA entry points,
chosen by device. `lse` is the backend's softmax statistics, kept for the backward. Dropout with
the program's own generator."""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


CUDA_BIAS_ALIGN = 16   # the efficient-attention kernel wants the bias rows 16-element aligned


def _additive(hide: torch.Tensor, q: torch.Tensor, align: int) -> torch.Tensor:
    """The additive scores mask (-inf where `hide`, [..., rows of q, rows of k]) in q's dtype, each row
    padded to `align` keys and sliced back (a view)."""
    sk = hide.shape[-1]
    bias = torch.zeros(*hide.shape[:-1], -(-sk // align) * align, dtype=q.dtype, device=q.device)[..., :sk]
    return bias.masked_fill_(hide, float("-inf"))


def _window_bias(q: torch.Tensor, k: torch.Tensor, window: int, offset: int, align: int = 1) -> torch.Tensor:
    """Additive scores mask of a causal sliding window: query row a (position a + offset) sees key row
    b iff 0 <= a + offset - b < window; broadcast over batch and heads. Dense: [rows of q, rows of k]."""
    sq, sk = q.shape[2], k.shape[2]
    d = (torch.arange(sq, device=q.device) + offset)[:, None] - torch.arange(sk, device=q.device)[None, :]
    return _additive((d < 0) | (d >= window), q, align).expand(q.shape[0], q.shape[1], sq, sk)


def _doc_bias(q: torch.Tensor, window: int, doc_pos: torch.Tensor, positions: tuple[torch.Tensor, torch.Tensor],
              align: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(additive scores mask, which query rows see any key) of causal attention within documents: query
    row a (at position qpos[a]) sees key row b iff 0 <= qpos[a] - kpos[b] <= doc_pos[:, a] (its own
    document, up to itself) and, under a window, < window. Dense: [batch, rows of q, rows of k]."""
    qpos, kpos = positions
    d = qpos[:, None] - kpos[None, :]
    hide = (d < 0) | (d > doc_pos[:, :, None])
    if window:
        hide |= d >= window
    return _additive(hide, q, align)[:, None].expand(q.shape[0], q.shape[1], *d.shape), ~hide.all(-1)


def _masking(q: torch.Tensor, k: torch.Tensor, causal: bool, window: int, offset: int,
             doc_pos: torch.Tensor | None, positions: tuple[torch.Tensor, torch.Tensor] | None) -> tuple:
    """(bias, is_causal, rows that see a key or None: all) for the SDPA entry points: a window's or the
    documents' mask holds its causality. positions: the global positions of q's and k's rows (default:
    consecutive, q's first at `offset` from k's)."""
    align = CUDA_BIAS_ALIGN if q.is_cuda else 1
    if doc_pos is not None:
        if positions is None:
            positions = (torch.arange(q.shape[2], device=q.device) + offset, torch.arange(k.shape[2], device=q.device))
        bias, seen = _doc_bias(q, window, doc_pos, positions, align)
        return bias, False, seen
    if not window:
        return None, causal, None
    return _window_bias(q, k, window, offset, align), False, None


def attention(q, k, v, causal: bool, scale: float, kv_groups: int, window: int = 0, offset: int = 0,
              doc_pos: torch.Tensor | None = None, positions: tuple[torch.Tensor, torch.Tensor] | None = None):
    """window > 0: a causal sliding window (the causality is in the mask), `offset` the position of
    q's first row minus k's (ring attention's blocks). doc_pos [B, rows of q]: each query's position in
    its document, which it attends no further back than (positions: see _masking). A query row that
    sees no key of a ring block (given positions) gives out 0 and lse -inf (nothing to merge); over
    the whole sequence every row sees its own key."""
    bias, causal, seen = _masking(q, k, causal, window, offset, doc_pos, positions)
    if q.is_cuda:
        k, v = _repeat_kv(k, kv_groups), _repeat_kv(v, kv_groups)
        out, lse, *_ = aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, causal, scale=scale)
    else:   # the CPU flash kernel takes grouped K/V as they are
        out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=bias,
                                                                    scale=scale)[:2]
    if seen is not None and positions is not None:
        rows = q.shape[2]
        out = out.masked_fill(~seen[:, None, :, None], 0.0)
        lse = lse.clone()
        lse[..., :rows] = lse[..., :rows].masked_fill(~seen[:, None, :], float("-inf"))
    return out, lse


def attention_grad(dout, q, k, v, out, lse, causal: bool, scale: float, kv_groups: int, window: int = 0,
                   offset: int = 0, doc_pos: torch.Tensor | None = None,
                   positions: tuple[torch.Tensor, torch.Tensor] | None = None):
    bias, causal, _ = _masking(q, k, causal, window, offset, doc_pos, positions)
    if not q.is_cuda:
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout, q, k, v, out, lse, 0.0, causal, attn_mask=bias, scale=scale)
    hk = k.shape[1]
    k, v = _repeat_kv(k, kv_groups), _repeat_kv(v, kv_groups)
    zero = torch.zeros((), dtype=torch.int64, device=q.device)
    dq, dk, dv, _ = aten._scaled_dot_product_efficient_attention_backward(
        dout, q, k, v, bias, out, lse, zero, zero, 0.0, [True, True, True, False], causal, scale=scale)
    if kv_groups > 1:
        b, _, s, d = dk.shape
        dk = dk.view(b, hk, kv_groups, s, d).sum(2)
        dv = dv.view(b, hk, kv_groups, s, d).sum(2)
    return dq, dk, dv


def dropout(x: torch.Tensor, p: float, train: bool | None,
            generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """aten.native_dropout drawing from `generator` (the ATen op takes none), computed as ATen's CPU
    kernel computes it: the same (output, bool mask) for the same generator state."""
    if train is False:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    keep = 1.0 - p
    mask = torch.empty_like(x, dtype=torch.bool).bernoulli_(keep, generator=generator)
    return x.mul(mask).mul_(1.0 / keep if keep else 0.0), mask
