"""The ring attention kernels (runtime/ring_attention.py) on P gloo ranks against one device's
attention over the whole sequence: forward out and lse, and dq, dk, dv, fp32, with the sequence
in contiguous blocks and in zigzag order, under sliding windows and packed documents.

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
from autosp.runtime.documents import doc_positions
from autosp.verify import documents_for

B, H, S, D = 2, 4, 24, 8


def _inputs(kv_heads: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    shapes = [(B, H, S, D), (B, kv_heads, S, D), (B, kv_heads, S, D), (B, H, S, D)]
    return [torch.randn(s, generator=g) for s in shapes]


def _doc_pos(docs: bool) -> torch.Tensor | None:
    """Each position's place in its document: 4 documents per row, cut at random (verify's batches)."""
    return doc_positions(documents_for([B, S], 5, padding=False)["position_ids"], None) if docs else None


def _blocks(x: torch.Tensor, p: int, order: str, dim: int = 2) -> list[torch.Tensor]:
    """Each rank's block of x along the sequence (`dim`), as the mesh's shard_slice cuts it."""
    if order == "contiguous":
        return list(x.chunk(p, dim))
    c = x.chunk(2 * p, dim)
    return [torch.cat([c[i], c[2 * p - 1 - i]], dim) for i in range(p)]


def _rank_blocks(p: int, causal: bool, kv_heads: int, order: str, window: int, docs: bool) -> list[torch.Tensor]:
    mesh = Mesh(p, 1, order=order)
    q, k, v, dout = (_blocks(x, p, order)[mesh.rank] for x in _inputs(kv_heads))
    doc_pos = _doc_pos(docs)
    doc_pos = None if doc_pos is None else _blocks(doc_pos, p, order, 1)[mesh.rank]
    flags = dict(causal=causal, scale=D ** -0.5, kv_groups=H // kv_heads, group="sp", window=window)
    out, lse = ring_attention.forward(mesh, q, k, v, doc_pos, **flags)
    return [out, lse, *ring_attention.backward(mesh, dout, q, k, v, out, lse, doc_pos, **flags)]


def _scale(name: str, ref: torch.Tensor, grads: list[torch.Tensor], window: int) -> float:
    """What an error is relative to: the value's own largest magnitude; with a window of 1, where dq and
    dk are exactly zero and their kernels' results fp32 noise, those two against the largest gradient."""
    if window == 1 and name in ("dq", "dk"):
        return max(g.abs().max().item() for g in grads)
    return ref.abs().max().item()


@pytest.mark.parametrize("p,causal,kv_heads,order,window,docs", [
    (2, True, 2, "contiguous", 0, False), (3, True, 1, "contiguous", 0, False), (3, False, 2, "contiguous", 0, False),
    (2, True, 2, "zigzag", 0, False), (3, True, 1, "zigzag", 0, False), (4, True, 4, "zigzag", 0, False),
    # sliding windows (blocks of 8 and 6 positions): a block travels 1, 2 or 0 hops
    (3, True, 1, "contiguous", 5, False), (4, True, 2, "contiguous", 13, False), (3, True, 2, "contiguous", 1, False),
    # packed documents: query rows that see nothing of a block (another document) add nothing
    (2, True, 2, "contiguous", 0, True), (3, True, 1, "zigzag", 0, True), (4, True, 2, "contiguous", 13, True)])
def test_ring_matches_one_device(p, causal, kv_heads, order, window, docs):
    q, k, v, dout = _inputs(kv_heads)
    args = (causal, D ** -0.5, H // kv_heads, window)
    doc_pos = _doc_pos(docs)
    out, lse = kernels.attention(q, k, v, *args, doc_pos=doc_pos)
    want = [out, lse, *kernels.attention_grad(dout, q, k, v, out, lse, *args, doc_pos=doc_pos)]
    ranks = spawn(p, _rank_blocks, p, causal, kv_heads, order, window, docs)
    for name, ref, *blocks in zip(("out", "lse", "dq", "dk", "dv"), want, *ranks):
        got = torch.cat(blocks, 2)
        expect = torch.cat(_blocks(ref.unsqueeze(-1) if ref.dim() == 3 else ref, p, order), 2)
        expect = expect.squeeze(-1) if ref.dim() == 3 else expect
        err = (got - expect).abs().max().item() / _scale(name, ref, want[2:], window)
        assert err <= 1e-5, f"{name} off by {err:.2e} relative at sp={p} ({order}, documents: {docs})"


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


@pytest.mark.parametrize("window", [0, 5])
def test_document_kernel_matches_math(window):
    """The kernels with packed documents against the float64 softmax where query i sees keys j with
    0 <= i - j <= its position in its document (and < window), and its gradients by autograd."""
    q, k, v, dout = _inputs(2)
    doc_pos = _doc_pos(True)
    out, lse = kernels.attention(q, k, v, True, D ** -0.5, 2, window, doc_pos=doc_pos)
    grads = kernels.attention_grad(dout, q, k, v, out, lse, True, D ** -0.5, 2, window, doc_pos=doc_pos)
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    d = (torch.arange(S)[:, None] - torch.arange(S)[None, :]).expand(B, 1, S, S)
    hide = (d < 0) | (d > doc_pos[:, None, :, None]) | (window > 0) & (d >= window)
    scores = q64 @ k64.repeat_interleave(2, 1).transpose(-2, -1) * D ** -0.5
    ref = torch.softmax(scores.masked_fill(hide, float("-inf")), -1) @ v64.repeat_interleave(2, 1)
    ref.backward(dout.double())
    assert bool((doc_pos < torch.arange(S)).any()), "the batch has no document boundary"
    for name, got, want in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref, q64.grad, k64.grad, v64.grad)):
        err = (got.double() - want).abs().max().item() / want.abs().max().item()
        assert err <= 1e-5, f"{name} off by {err:.2e} relative (window {window})"


def test_window_bias_aligned_as_cuda_needs():
    """The CUDA path's bias (built here on CPU with its alignment): each row starts on a 16-element
    boundary, and it masks exactly as the unaligned one."""
    q, k, _, _ = _inputs(2)
    k = k[:, :, :21]   # 21 keys: rows padded to 32
    plain, aligned = kernels._window_bias(q, k, 5, 3, 1), kernels._window_bias(q, k, 5, 3, kernels.CUDA_BIAS_ALIGN)
    assert aligned.stride(2) % kernels.CUDA_BIAS_ALIGN == 0 and aligned.shape == plain.shape == (B, H, S, 21)
    assert torch.equal(aligned, plain)
