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


def _rank_blocks(p: int, causal: bool, kv_heads: int, order: str) -> list[torch.Tensor]:
    mesh = Mesh(p, 1, order=order)
    q, k, v, dout = (_blocks(x, p, order)[mesh.rank] for x in _inputs(kv_heads))
    args = (causal, D ** -0.5, H // kv_heads, "sp")
    out, lse = ring_attention.forward(mesh, q, k, v, *args)
    return [out, lse, *ring_attention.backward(mesh, dout, q, k, v, out, lse, *args)]


@pytest.mark.parametrize("p,causal,kv_heads,order", [
    (2, True, 2, "contiguous"), (3, True, 1, "contiguous"), (3, False, 2, "contiguous"),
    (2, True, 2, "zigzag"), (3, True, 1, "zigzag"), (4, True, 4, "zigzag")])
def test_ring_matches_one_device(p, causal, kv_heads, order):
    q, k, v, dout = _inputs(kv_heads)
    args = (causal, D ** -0.5, H // kv_heads)
    out, lse = kernels.attention(q, k, v, *args)
    want = [out, lse, *kernels.attention_grad(dout, q, k, v, out, lse, *args)]
    ranks = spawn(p, _rank_blocks, p, causal, kv_heads, order)
    for name, ref, *blocks in zip(("out", "lse", "dq", "dk", "dv"), want, *ranks):
        got = torch.cat(blocks, 2)
        expect = torch.cat(_blocks(ref.unsqueeze(-1) if ref.dim() == 3 else ref, p, order), 2)
        expect = expect.squeeze(-1) if ref.dim() == 3 else expect
        err = (got - expect).abs().max().item() / ref.abs().max().item()
        assert err <= 1e-5, f"{name} off by {err:.2e} relative at sp={p} ({order})"
