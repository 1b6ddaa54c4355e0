"""Attention as one semantic op for capture.

`F.scaled_dot_product_attention` calls are redirected (by `AttentionCapture`, a TorchFunctionMode)
to `autosp::attention`, a torch.library op with its own backward op. Both survive fake tracing as
single named ops, which `sp-raise-attention` turns into `sp.attention` / `sp.attention_grad`.
Hugging Face models call `hf_attention` instead (their attention implementation "autosp" while
they are captured): it sees the sliding window a layer attends with, which reaches SDPA only as a
materialized mask. The ops are capture-only: compiled programs execute them through the runtime's
kernels.
"""
from __future__ import annotations

from contextvars import ContextVar

import torch
import torch.nn.functional as F
from torch import Tensor

from .errors import CaptureError, user_frame

# [B, S] each token's position in its document while a step with packed documents is captured
# (capture._TrainStep sets it): Hugging Face attention attends no further back
DOC_POS: ContextVar[Tensor | None] = ContextVar("autosp_doc_pos", default=None)


@torch.library.custom_op("autosp::attention", mutates_args=())
def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float, window: int,
              doc_pos: Tensor | None = None) -> tuple[Tensor, Tensor]:
    raise RuntimeError("autosp::attention is capture-only; run compiled programs with autosp.load()")


@attention.register_fake
def _(q, k, v, causal, scale, window, doc_pos=None):
    b, h, s, _ = q.shape
    # contiguous like a real kernel's output (empty_like would keep q's transposed strides)
    return q.new_empty(q.shape), q.new_empty((b, h, s), dtype=torch.float32)


@torch.library.custom_op("autosp::attention_backward", mutates_args=())
def attention_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor,
                       causal: bool, scale: float, window: int,
                       doc_pos: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    raise RuntimeError("autosp::attention_backward is capture-only")


@attention_backward.register_fake
def _(dout, q, k, v, out, lse, causal, scale, window, doc_pos=None):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


def _setup(ctx, inputs, output):
    q, k, v, causal, scale, window, doc_pos = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, doc_pos)
    ctx.causal, ctx.scale, ctx.window = causal, scale, window


def _backward(ctx, dout, _dlse):
    q, k, v, out, lse, doc_pos = ctx.saved_tensors
    dq, dk, dv = attention_backward(dout, q, k, v, out, lse, ctx.causal, ctx.scale, ctx.window, doc_pos)
    return dq, dk, dv, None, None, None, None


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
    if DOC_POS.get() is not None:
        raise CaptureError("packed documents and attention masks reach only Hugging Face attention (the "
                           "implementation autosp registers); this scaled_dot_product_attention would attend "
                           "across documents", where)
    return _semantic(q, k, v, bool(is_causal), scale, 0, enable_gqa, where)


def _semantic(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float | None, window: int, gqa: bool,
              where: str | None, doc_pos: Tensor | None = None) -> Tensor:
    """autosp::attention of [B, H, S, D] q and [B, H / g, S, D] k, v; window: each query attends to the
    `window` positions up to its own (0: no window); doc_pos: and no further back than its document's start."""
    if q.dim() != 4:
        raise CaptureError(f"attention expects [batch, heads, seq, head_dim] tensors, got q of rank {q.dim()}",
                           where)
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk and (not gqa or hq % hk):
        raise CaptureError(f"attention with {hq} query heads and {hk} key/value heads "
                           f"(enable_gqa={gqa}) is not valid grouped-query attention", where)
    if window and not causal:
        raise CaptureError(f"a sliding window of {window} without causal attention is not supported", where)
    s = float(q.shape[-1] ** -0.5 if scale is None else scale)
    if torch.is_autocast_enabled(q.device.type):   # autocast runs SDPA in its lower precision
        low = torch.get_autocast_dtype(q.device.type)   # and, as autocast, leaves float64 alone
        q, k, v = (x.to(low) if x.is_floating_point() and x.dtype != torch.float64 else x for x in (q, k, v))
    if doc_pos is not None and not causal:
        raise CaptureError("packed documents or an attention mask with non-causal attention are not supported",
                           where)
    window = 0 if window >= q.shape[2] else window   # a window as long as the sequence is plain causal
    out, _ = torch.ops.autosp.attention(q, k, v, causal, s, window, doc_pos)
    return out


_HF_REFUSED = {"softcap": "attention logit softcapping", "s_aux": "attention sinks",
               "position_bias": "a position bias added to the attention scores"}


def hf_attention(module, query: Tensor, key: Tensor, value: Tensor, attention_mask, dropout: float = 0.0,
                 scaling: float | None = None, is_causal: bool | None = None, sliding_window: int | None = None,
                 **kwargs) -> tuple[Tensor, None]:
    """The attention implementation "autosp" of transformers (registered while a model is captured):
    as its `sdpa_attention_forward`, with the layer's sliding window kept as a window."""
    where = user_frame()
    if attention_mask is not None:   # autosp's own steps pass none: theirs become document positions
        raise CaptureError("an attention mask built by the model is not supported (autosp shards causal, "
                           "sliding-window or full attention; padding and packed documents go through "
                           "compile(packed=True))", where)
    if dropout:
        raise CaptureError(f"attention dropout {dropout} is not supported: dropout inside attention cannot be "
                           "reproduced exactly across sequence shards (set attention_dropout=0)", where)
    for key_, what in _HF_REFUSED.items():
        if kwargs.get(key_) is not None:
            raise CaptureError(f"{what} ({type(module).__name__}) is not supported", where)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = _semantic(query, key, value, bool(causal), scaling, int(sliding_window or 0), True, where, DOC_POS.get())
    return out.transpose(1, 2).contiguous(), None


class AttentionCapture(torch.overrides.TorchFunctionMode):
    """Redirects F.scaled_dot_product_attention to the semantic op autosp::attention."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            with self:  # keep the mode active for ops inside the rewrite
                return _sdpa_to_semantic(*args, **kwargs)
        return func(*args, **kwargs)
