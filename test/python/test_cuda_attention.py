"""The CUDA branch of the attention kernels (runtime/kernels.py) without a GPU: which kernel runs
(FlashAttention-2 for fp16/bf16, the memory-efficient one for fp32 and document masks), the window
FA2 is given against the mask it replaces, and the calls themselves on the `meta` device (ATen's meta
kernels check the arguments and give the results' shapes, dtypes and strides) against the CPU
kernels' results."""
from __future__ import annotations

import pytest
import torch

from autosp.runtime import kernels

B, H, S, D = 2, 4, 32, 16


def _fa2_sees(rows_q: int, rows_k: int, causal: bool, window: tuple[int, int] | None) -> torch.Tensor:
    """FlashAttention-2's visibility [rows_q, rows_k]: its causal mask and window are aligned to the
    bottom-right corner, query row i standing at key row i + rows_k - rows_q."""
    at = torch.arange(rows_q)[:, None] + rows_k - rows_q
    j = torch.arange(rows_k)[None, :]
    if causal:
        return j <= at
    if window is None:
        return torch.ones(rows_q, rows_k, dtype=torch.bool)
    left, right = window
    return (j >= at - left) & (j <= at + right)


@pytest.mark.parametrize("rows_q,rows_k", [(8, 8), (8, 12), (12, 8)])
def test_flash_window_is_the_mask_it_replaces(rows_q, rows_k):
    """Every window, offset and causality FA2 is given sees exactly the keys the dense mask shows."""
    q, k = torch.zeros(1, 1, rows_q, 8), torch.zeros(1, 1, rows_k, 8)
    taken = 0
    for window in range(0, 15):
        for offset in range(-4, 16):
            args = kernels.cuda_flash(True, 64, rows_q, rows_k, True, window, offset, False)
            if args is None:
                continue
            taken += 1
            if window:
                want = kernels._window_bias(q, k, window, offset)[0, 0] == 0
            else:   # plain causal attention: top-left, as the efficient kernel and the CPU one read it
                want = torch.ones(rows_q, rows_k, dtype=torch.bool).tril()
            assert torch.equal(_fa2_sees(rows_q, rows_k, *args), want), (window, offset, args)
    assert taken >= 20


def test_flash_only_where_it_applies():
    assert kernels.cuda_flash(True, 64, S, S, True, 0, 0, False) == (True, None)
    assert kernels.cuda_flash(True, 64, S, S, False, 0, 0, False) == (False, None)
    assert kernels.cuda_flash(True, 64, S, S, True, 8, 0, False) == (False, (7, 0))
    assert kernels.cuda_flash(False, 64, S, S, True, 0, 0, False) is None       # fp32
    assert kernels.cuda_flash(True, 64, S, S, True, 0, 0, True) is None         # documents: a dense mask
    assert kernels.cuda_flash(True, 68, S, S, True, 0, 0, False) is None        # head dim not a multiple of 8
    assert kernels.cuda_flash(True, 320, S, S, True, 0, 0, False) is None       # head dim over 256
    assert kernels.cuda_flash(True, 64, S, S, True, 8, 0, False, windows=False) is None   # ROCm's build
    assert kernels.cuda_flash(True, 64, S, S, True, 4, 8, False) is None        # no key in reach: left < 0


def _inputs(device: str, dtype: torch.dtype, kv_heads: int) -> list[torch.Tensor]:
    """q, k, v as a projection's [B, S, H, D] viewed [B, H, S, D], and dout."""
    g = torch.Generator().manual_seed(0)

    def make(heads: int) -> torch.Tensor:
        x = torch.randn(B, S, heads, D, generator=g).to(dtype)
        return (x if device == "cpu" else torch.empty_like(x, device=device)).transpose(1, 2)
    return [make(H), make(kv_heads), make(kv_heads), make(H)]


@pytest.mark.parametrize("dtype,kv_heads,window,docs,kernel", [
    (torch.bfloat16, 2, 0, False, "flash"),
    (torch.bfloat16, 4, 6, False, "flash"),
    (torch.float16, 1, 0, False, "flash"),
    (torch.bfloat16, 2, 0, True, "efficient"),
    (torch.float32, 2, 0, False, "efficient"),
    (torch.float32, 2, 6, False, "efficient"),
])
def test_cuda_branch_on_meta(monkeypatch, dtype, kv_heads, window, docs, kernel):
    """The CUDA calls made on `meta` tensors (the branch taken as on a GPU) give what the CPU kernels
    give: out [B, H, S, D] and lse [B, H, S] fp32, gradients of their operands' shapes, in the
    operands' dtype; FA2 runs the fp16/bf16 cases, the efficient kernel the others."""
    groups = H // kv_heads
    doc_pos = torch.tensor([[0, 1, 2, 3] * (S // 4)] * B) if docs else None
    q, k, v, dout = _inputs("cpu", dtype, kv_heads)
    want = [*kernels.attention(q, k, v, True, D ** -0.5, groups, window, doc_pos=doc_pos)]
    want += kernels.attention_grad(dout, q, k, v, *want, True, D ** -0.5, groups, window, doc_pos=doc_pos)

    calls = []
    flash, flash_grad = kernels._flash, kernels._flash_grad
    monkeypatch.setattr(kernels, "_cuda", lambda x: True)
    monkeypatch.setattr(kernels, "_flash", lambda *a: calls.append("flash") or flash(*a))
    monkeypatch.setattr(kernels, "_flash_grad", lambda *a: calls.append("flash") or flash_grad(*a))
    q, k, v, dout = _inputs("meta", dtype, kv_heads)
    doc_pos = None if doc_pos is None else doc_pos.to("meta")
    got = [*kernels.attention(q, k, v, True, D ** -0.5, groups, window, doc_pos=doc_pos)]
    got += kernels.attention_grad(dout, q, k, v, *got, True, D ** -0.5, groups, window, doc_pos=doc_pos)

    assert calls == (["flash", "flash"] if kernel == "flash" else [])
    for name, g, w in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), name


def test_head_groups():
    """Long rows run as several calls over fewer heads, short rows as one call: each call keeps 1024
    blocks of 128 keys x heads, over a divisor of the K/V heads."""
    assert kernels.head_groups(1, 16, 8, 131072) == 8
    assert kernels.head_groups(1, 16, 8, 16384) == 2
    assert kernels.head_groups(1, 16, 8, 4096) == 1
    assert kernels.head_groups(1, 4, 1, 131072) == 1      # one K/V head: nothing to cut
    assert kernels.head_groups(1, 12, 6, 1 << 20) == 6


def test_in_groups_is_the_whole_call():
    """Attention run as 2 groups of heads (each with its own K/V heads), results written into the
    whole ones, is the whole call: every head is computed alone by the kernel either way."""
    q, k, v, dout = _inputs("cpu", torch.float32, 2)
    groups = H // 2

    def fwd(q, k, v):
        return kernels.attention(q, k, v, True, D ** -0.5, groups)

    def bwd(dout, q, out, lse, k, v):
        return kernels.attention_grad(dout, q, k, v, out, lse, True, D ** -0.5, groups)
    out, lse = fwd(q, k, v)
    parts = kernels._in_groups(fwd, 2, [q], [k, v])
    assert torch.equal(parts[0], out) and torch.equal(parts[1], lse)
    grads = kernels._in_groups(bwd, 2, [dout, q, out, lse], [k, v])
    for got, want in zip(grads, bwd(dout, q, out, lse, k, v)):
        assert torch.equal(got, want)


@pytest.mark.parametrize("dtype,window", [(torch.bfloat16, 0), (torch.float32, 6)])
def test_groups_on_meta(monkeypatch, dtype, window):
    """The CUDA calls cut into 2 groups of heads give the whole call's shapes, dtypes and strides."""
    monkeypatch.setattr(kernels, "_cuda", lambda x: True)
    q, k, v, dout = _inputs("meta", dtype, 2)
    runs = []
    for groups in (1, 2):
        monkeypatch.setattr(kernels, "head_groups", lambda *a: groups)
        out, lse = kernels.attention(q, k, v, True, D ** -0.5, 2, window)
        runs.append([out, lse, *kernels.attention_grad(dout, q, k, v, out, lse, True, D ** -0.5, 2, window)])
    for one, two in zip(*runs):
        assert (one.shape, one.dtype, one.stride()) == (two.shape, two.dtype, two.stride())
