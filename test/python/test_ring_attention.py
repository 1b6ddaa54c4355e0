"""The ring attention kernels (runtime/ring_attention.py) on P gloo ranks against one device's
attention over the whole sequence: forward out and lse, and dq, dk, dv, fp32, with the sequence
in contiguous blocks and in zigzag order.

Tolerance: the ring merges P blocks' outputs by their statistics, and sums P blocks' shares of dk
and dv, where the one-device kernel does the same over its own tiles: fp32 sums of the same terms
in another order. They agree to ~1e-7..6e-7 of the largest value (seen at sp=3); 1e-5, the suite's
fp32 tolerance, leaves a margin that does not depend on the order."""
from __future__ import annotations

import pytest
import torch

from autosp.launch import spawn
from autosp.runtime import kernels, ring_attention
from autosp.runtime.collectives import Mesh

B, H, S, D = 2, 4, 24, 8


def _inputs(kv_heads: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shapes = [(B, H, S, D), (B, kv_heads, S, D), (B, kv_heads, S, D), (B, H, S, D)]
    return [torch.randn(s, generator=g) for s in shapes]


def _blocks(x: torch.Tensor, p: int, order: str) -> list[torch.Tensor]:
    """Each rank's block of x along the sequence (dim 2), as the mesh's shard_slice cuts it."""
    if order == "contiguous":
        return list(x.chunk(p, 2))
    c = x.chunk(2 * p, 2)
    return [torch.cat([c[i], c[2 * p - 1 - i]], 2) for i in range(p)]


def _rank_blocks(p: int, causal: bool, kv_heads: int, order: str, window: int) -> list[torch.Tensor]:
    mesh = Mesh(p, 1, order=order)
    q, k, v, dout = (_blocks(x, p, order)[mesh.rank] for x in _inputs(kv_heads))
    args = (causal, D ** -0.5, H // kv_heads, "sp", window)
    out, lse = ring_attention.forward(mesh, q, k, v, *args)
    return [out, lse, *ring_attention.backward(mesh, dout, q, k, v, out, lse, *args)]


def _scale(name: str, ref: torch.Tensor, grads: list[torch.Tensor], window: int) -> float:
    """What an error is relative to: the value's own largest magnitude; with a window of 1, where dq and
    dk are exactly zero and their kernels' results fp32 noise, those two against the largest gradient."""
    if window == 1 and name in ("dq", "dk"):
        return max(g.abs().max().item() for g in grads)
    return ref.abs().max().item()


@pytest.mark.parametrize("p,causal,kv_heads,order,window", [
    (2, True, 2, "contiguous", 0), (3, True, 1, "contiguous", 0), (3, False, 2, "contiguous", 0),
    (2, True, 2, "zigzag", 0), (3, True, 1, "zigzag", 0), (4, True, 4, "zigzag", 0),
    # sliding windows (blocks of 8 and 6 positions): a block travels 1, 2 or 0 hops
    (3, True, 1, "contiguous", 5), (4, True, 2, "contiguous", 13), (3, True, 2, "contiguous", 1)])
def test_ring_matches_one_device(p, causal, kv_heads, order, window):
    q, k, v, dout = _inputs(kv_heads)
    args = (causal, D ** -0.5, H // kv_heads, window)
    out, lse = kernels.attention(q, k, v, *args)
    want = [out, lse, *kernels.attention_grad(dout, q, k, v, out, lse, *args)]
    ranks = spawn(p, _rank_blocks, p, causal, kv_heads, order, window)
    for name, ref, *blocks in zip(("out", "lse", "dq", "dk", "dv"), want, *ranks):
        got = torch.cat(blocks, 2)
        expect = torch.cat(_blocks(ref.unsqueeze(-1) if ref.dim() == 3 else ref, p, order), 2)
        expect = expect.squeeze(-1) if ref.dim() == 3 else expect
        err = (got - expect).abs().max().item() / _scale(name, ref, want[2:], window)
        assert err <= 1e-5, f"{name} off by {err:.2e} relative at sp={p} ({order})"


@pytest.mark.parametrize("window", [1, 5, 24])
def test_window_kernel_matches_math(window):
    """The sliding-window kernels against softmax(q k^T + mask) v written out in float64, where query
    i sees keys j with 0 <= i - j < window, and its gradients by autograd (errors relative as _scale)."""
    q, k, v, dout = _inputs(2)
    out, lse = kernels.attention(q, k, v, True, D ** -0.5, 2, window)
    grads = kernels.attention_grad(dout, q, k, v, out, lse, True, D ** -0.5, 2, window)
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    d = torch.arange(S)[:, None] - torch.arange(S)[None, :]
    scores = q64 @ k64.repeat_interleave(2, 1).transpose(-2, -1) * D ** -0.5
    ref = torch.softmax(scores.masked_fill((d < 0) | (d >= window), float("-inf")), -1) @ v64.repeat_interleave(2, 1)
    ref.backward(dout.double())
    for name, got, want in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref, q64.grad, k64.grad, v64.grad)):
        err = (got.double() - want).abs().max().item() / _scale(name, want, [q64.grad, k64.grad, v64.grad], window)
        assert err <= 1e-5, f"{name} off by {err:.2e} relative (window {window})"


def test_window_bias_aligned_as_cuda_needs():
    """The CUDA path's bias (built here on CPU with its alignment): each row starts on a 16-element
    boundary, and it masks exactly as the unaligned one."""
    q, k, _, _ = _inputs(2)
    k = k[:, :, :21]   # 21 keys: rows padded to 32
    plain, aligned = kernels._window_bias(q, k, 5, 3, 1), kernels._window_bias(q, k, 5, 3, kernels.CUDA_BIAS_ALIGN)
    assert aligned.stride(2) % kernels.CUDA_BIAS_ALIGN == 0 and aligned.shape == plain.shape == (B, H, S, 21)
    assert torch.equal(aligned, plain)
