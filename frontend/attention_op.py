"""Attention as one semantic op for capture.

`F.scaled_dot_product_attention` calls are redirected (by `AttentionCapture`, a TorchFunctionMode)
to `autosp::attention`, a torch.library op with its own backward op. Both survive fake tracing as
single named ops, which `sp-raise-attention` turns into `sp.attention` / `sp.attention_grad`.
The ops are capture-only: compiled programs execute them through the runtime's kernels.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .errors import CaptureError, user_frame


@torch.library.custom_op("autosp::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float) -> tuple[Tensor, Tensor]:
    raise RuntimeError("autosp::attention is capture-only; run compiled programs with autosp.load()")


@attention.register_fake
def _(q, k, v, causal, scale):
    b, h, s, _ = q.shape
    # contiguous like a real kernel's output (empty_like would keep q's transposed strides)
    return q.new_empty(q.shape), q.new_empty((b, h, s), dtype=torch.float32)


@torch.library.custom_op("autosp::attention_backward", mutates_args=())
def attention_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                       causal: bool, scale: float) -> tuple[Tensor, Tensor, Tensor]:
    raise RuntimeError("autosp::attention_backward is capture-only")


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, causal, scale):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup(ctx, inputs, output):
    q, k, v, causal, scale = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse)
    ctx.causal, ctx.scale = causal, scale


def _backward(ctx, dout, _dlse):
    q, k, v, out, lse = ctx.saved_tensors
    dq, dk, dv = attention_backward(dout, q, k, v, out, lse, ctx.causal, ctx.scale)
    return dq, dk, dv, None, None


attention.register_autograd(_backward, setup_context=_setup)


def _sdpa_to_semantic(q: Tensor, k: Tensor, v: Tensor, attn_mask=None, dropout_p: float = 0.0,
                      is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    where = user_frame()
    if attn_mask is not None:
        raise CaptureError("scaled_dot_product_attention with an explicit attn_mask is not supported "
                           "(autosp shards causal or full attention; pass is_causal instead)", where)
    if dropout_p != 0.0:
        raise CaptureError(f"attention dropout_p={dropout_p} is not supported: dropout inside attention "
                           "cannot be reproduced exactly across sequence shards", where)
    if q.dim() != 4:
        raise CaptureError(f"attention expects [batch, heads, seq, head_dim] tensors, got q of rank {q.dim()}",
                           where)
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk and (not enable_gqa or hq % hk):
        raise CaptureError(f"attention with {hq} query heads and {hk} key/value heads "
                           f"(enable_gqa={enable_gqa}) is not valid grouped-query attention", where)
    s = float(q.shape[-1] ** -0.5 if scale is None else scale)
    if torch.is_autocast_enabled(q.device.type):   # autocast runs SDPA in its lower precision
        low = torch.get_autocast_dtype(q.device.type)   # and, as autocast, leaves float64 alone
        q, k, v = (x.to(low) if x.is_floating_point() and x.dtype != torch.float64 else x for x in (q, k, v))
    out, _ = torch.ops.autosp.attention(q, k, v, bool(is_causal), s)
    return out


class AttentionCapture(torch.overrides.TorchFunctionMode):
    """Redirects F.scaled_dot_product_attention to the semantic op autosp::attention."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            with self:  # keep the mode active for ops inside the rewrite
                return _sdpa_to_semantic(*args, **kwargs)
        return func(*args, **kwargs)
