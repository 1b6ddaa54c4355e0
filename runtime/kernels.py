"""Attention kernels behind sp.attention / sp.attention_grad: ATen's fused SDPA entry points,
chosen by device. `lse` is the backend's softmax statistics, kept for the backward. Dropout with
the program's own generator."""
from __future__ import annotations

import torch

aten = torch.ops.aten


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


CUDA_BIAS_ALIGN = 16   # the efficient-attention kernel wants the bias rows 16-element aligned


def _window_bias(q: torch.Tensor, k: torch.Tensor, window: int, offset: int, align: int = 1) -> torch.Tensor:
    """Additive scores mask of a causal sliding window: query row a (position a + offset) sees key row
    b iff 0 <= a + offset - b < window; rows padded to `align` keys and sliced back (a view), broadcast
    over batch and heads. Dense: [rows of q, rows of k] per call."""
    sq, sk = q.shape[2], k.shape[2]
    d = (torch.arange(sq, device=q.device) + offset)[:, None] - torch.arange(sk, device=q.device)[None, :]
    bias = torch.zeros(sq, -(-sk // align) * align, dtype=q.dtype, device=q.device)[:, :sk]
    bias.masked_fill_((d < 0) | (d >= window), float("-inf"))
    return bias.expand(q.shape[0], q.shape[1], sq, sk)


def _masking(q: torch.Tensor, k: torch.Tensor, causal: bool, window: int, offset: int) -> tuple:
    """(bias, is_causal) for the SDPA entry points: a window's mask holds its causality."""
    if not window:
        return None, causal
    return _window_bias(q, k, window, offset, CUDA_BIAS_ALIGN if q.is_cuda else 1), False


def attention(q, k, v, causal: bool, scale: float, kv_groups: int, window: int = 0, offset: int = 0):
    """window > 0: a causal sliding window (the causality is in the mask), `offset` the position of
    q's first row minus k's (ring attention's blocks)."""
    bias, causal = _masking(q, k, causal, window, offset)
    if q.is_cuda:
        k, v = _repeat_kv(k, kv_groups), _repeat_kv(v, kv_groups)
        out, lse, *_ = aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, causal, scale=scale)
        return out, lse
    # the CPU flash kernel takes grouped K/V as they are
    return aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=bias, scale=scale)


def attention_grad(dout, q, k, v, out, lse, causal: bool, scale: float, kv_groups: int, window: int = 0,
                   offset: int = 0):
    bias, causal = _masking(q, k, causal, window, offset)
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
