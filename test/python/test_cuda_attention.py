"""The CUDA branch of the attention kernels (runtime/kernels.py) without a GPU: which kernel runs
(FlashAttention-2 for fp16/bf16, over packed documents as its variable-length batch; the
memory-efficient one for fp32 and ring blocks' document masks), the window FA2 is given against the
mask it replaces, the calls themselves on the `meta` device (ATen's meta kernels check the arguments
and give the results' shapes, dtypes and strides) against the CPU kernels' results, and the FA2 calls'
numerics through a CPU stand-in that computes what FA2's contract says."""
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
    assert kernels.cuda_flash(True, 64, S, S, True, 0, 0, True) == (True, None)  # documents: each a sequence
    assert kernels.cuda_flash(True, 64, S, S, False, 0, 0, True) == (True, None)  # whole: causal within each
    assert kernels.cuda_flash(True, 64, S, S, False, 0, 0, True, block=True) == (False, None)   # a block before q's
    assert kernels.cuda_flash(True, 64, S, S, True, 8, 0, True) == (False, (7, 0))
    assert kernels.cuda_flash(True, 64, S, S, True, 8, 0, True, block=True) is None   # a window's block: a mask
    assert kernels.cuda_flash(True, 64, S, S, True, 0, 0, True, rocm=True) is None
    assert kernels.cuda_flash(True, 68, S, S, True, 0, 0, False) is None        # head dim not a multiple of 8
    assert kernels.cuda_flash(True, 320, S, S, True, 0, 0, False) is None       # head dim over 256
    assert kernels.cuda_flash(True, 64, S, S, True, 8, 0, False, rocm=True) is None   # ROCm's build
    assert kernels.cuda_flash(True, 64, S, S, True, 4, 8, False) is None        # no key in reach: left < 0


def test_op_flash():
    """The plan's and inspect's view of an attention op: FA2 as its calls decide, a ring's by its
    diagonal block; a ring's documents under a window are a mask."""
    assert kernels.op_flash(True, 64, S, True, 0, False, False)
    assert not kernels.op_flash(False, 64, S, True, 0, False, False)     # fp32
    assert kernels.op_flash(True, 64, S, False, 0, True, False)      # documents over the whole sequence: causal
    assert kernels.op_flash(True, 64, S, True, 0, True, True) and kernels.op_flash(True, 64, S, True, 8, True, False)
    assert not kernels.op_flash(True, 64, S, True, 8, True, True)


def test_documents_batch():
    """The variable-length batch: over the whole sequence each document is a sequence of q's and k's
    rows; for a block of keys before the queries (a ring's), the keys of the first query's document
    pair with its queries, the keys before it form a sequence without queries, and the later
    documents' queries see no key."""
    whole = kernels.varlen_batch(torch.tensor([[0, 1, 2, 0, 1], [0, 1, 2, 3, 4]]), 5, None, torch.device("cpu"))
    assert whole.cu_q.tolist() == whole.cu_k.tolist() == [0, 3, 5, 10] and whole.cu_q.dtype == torch.int32
    assert (whole.max_q, whole.max_k, whole.seen) == (5, 5, None)
    block = kernels.varlen_batch(torch.tensor([[2, 3, 0, 1]]), 4, (torch.arange(4, 8), torch.arange(4)),
                              torch.device("cpu"))
    assert (block.cu_q.tolist(), block.cu_k.tolist(), block.max_q, block.max_k) == ([0, 0, 2, 4], [0, 2, 4, 4], 2, 2)
    assert block.seen.tolist() == [[True, True, False, False]]
    ones = kernels.varlen_batch(torch.tensor([[0, 0, 0]]), 3, None, torch.device("cpu"))   # never 1: FA2's GQA fold
    assert (ones.cu_q.tolist(), ones.max_q, ones.max_k) == ([0, 1, 2, 3], 2, 1)


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
    (torch.bfloat16, 2, 0, True, "flash"),
    (torch.bfloat16, 2, 6, True, "flash"),
    (torch.float32, 2, 0, True, "efficient"),
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
    if doc_pos is not None and kernel == "efficient":   # FA2's documents are read on the host, from CPU here
        doc_pos = doc_pos.to("meta")
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


class _FA2Contract:
    """ATen with FlashAttention-2's two entry points computed on the CPU, in fp32, as FA2's contract
    says (flash_api.cpp, the meta kernels): q [B, Sq, H, D] and k / v [B, Sk, Hk, D], or over a
    variable-length batch [total, H, D] with int32 cumulative lengths; query head h reads K/V head
    h // (H / Hk); the causal mask and the (left, right) window aligned to each sequence's last rows;
    lse [B, H, Sq] fp32, or [H, total]; a query that sees no key gets out 0 and lse +inf; the
    backward recomputes the probabilities from the lse it is given and uses out (D = rowsum(dout *
    out)), as FA2's does. It checks what FA2 checks."""

    def __getattr__(self, name):
        return getattr(torch.ops.aten, name)

    @staticmethod
    def _sequences(q, k, cu_q, cu_k, max_q, max_k) -> list[tuple]:
        """Per sequence, the indices of its rows in q (out, dout), in k (v) and in the lse: a batch
        entry, or a slice of the variable-length batch."""
        assert q.dtype in kernels.FLASH_DTYPES and q.stride(-1) == k.stride(-1) == 1
        assert (cu_q is None) == (cu_k is None)
        if cu_q is None:
            assert (q.shape[1], k.shape[1]) == (max_q, max_k)
            return [(b, b, b) for b in range(q.shape[0])]
        assert cu_q.dtype == cu_k.dtype == torch.int32 and q.dim() == 3 and len(cu_q) == len(cu_k)
        assert int(cu_q.diff().max()) <= max_q and int(cu_k.diff().max()) <= max_k
        assert int(cu_q[-1]) == q.shape[0] and int(cu_k[-1]) == k.shape[0]
        return [(slice(int(a), int(b)), slice(int(c), int(d)), (slice(None), slice(int(a), int(b))))
                for a, b, c, d in zip(cu_q[:-1], cu_q[1:], cu_k[:-1], cu_k[1:])]

    @staticmethod
    def _probs(q, k, lse, causal, left, right, scale):
        """Scores [H, sq, sk] of one sequence and their probabilities (from lse [H, sq] if given)."""
        groups = q.shape[1] // k.shape[1]
        k = k.float().repeat_interleave(groups, 1)
        s = torch.einsum("qhd,khd->hqk", q.float(), k) * scale
        sq, sk = q.shape[0], k.shape[0]
        at = torch.arange(sq)[:, None] + sk - sq
        j = torch.arange(sk)[None, :]
        right = 0 if causal else right
        hide = torch.zeros(sq, sk, dtype=torch.bool)
        if right is not None and right >= 0:
            hide |= j > at + right
        if left is not None and left >= 0:
            hide |= j < at - left
        s = s.masked_fill(hide, float("-inf"))
        lse = torch.logsumexp(s, -1) if lse is None else lse
        return torch.exp(s - lse[..., None]), lse

    def _flash_attention_forward(self, q, k, v, cu_q, cu_k, max_q, max_k, dropout, causal, debug, *, scale,
                                 window_size_left=None, window_size_right=None):
        assert dropout == 0.0 and not debug
        out = torch.empty_like(q)
        lse = torch.empty(*((q.shape[0], q.shape[2], q.shape[1]) if cu_q is None else (q.shape[1], q.shape[0])))
        groups = q.shape[-2] // k.shape[-2]
        for iq, ik, il in self._sequences(q, k, cu_q, cu_k, max_q, max_k):
            p, l = self._probs(q[iq], k[ik], None, causal, window_size_left, window_size_right, scale)
            lse[il] = l.nan_to_num(posinf=float("inf"), neginf=float("inf"))   # no key: out 0 and lse +inf
            out[iq] = torch.einsum("hqk,khd->qhd", p, v[ik].float().repeat_interleave(groups, 1)).to(q.dtype)
        return out, lse, None, None, None

    def _flash_attention_backward(self, dout, q, k, v, out, lse, cu_q, cu_k, max_q, max_k, dropout, causal,
                                  seed, offset, *, scale, window_size_left=None, window_size_right=None):
        assert dropout == 0.0 and lse.is_contiguous() and dout.stride(-1) == out.stride(-1) == 1
        assert lse.shape == ((q.shape[0], q.shape[2], q.shape[1]) if cu_q is None else (q.shape[1], q.shape[0]))
        dq, dk, dv = (torch.empty_like(x) for x in (q, k, v))
        groups = q.shape[-2] // k.shape[-2]
        for iq, ik, il in self._sequences(q, k, cu_q, cu_k, max_q, max_k):
            p, _ = self._probs(q[iq], k[ik], lse[il], causal, window_size_left, window_size_right, scale)
            do, o = dout[iq].float(), out[iq].float()
            kf, vf = (x[ik].float().repeat_interleave(groups, 1) for x in (k, v))
            ds = p * (torch.einsum("qhd,khd->hqk", do, vf) - (do * o).sum(-1).transpose(0, 1)[..., None])
            parts = (torch.einsum("hqk,khd->qhd", ds, kf) * scale,
                     torch.einsum("hqk,qhd->khd", ds, q[iq].float()) * scale,
                     torch.einsum("hqk,qhd->khd", p, do))
            for whole, part, i in zip((dq, dk, dv), parts, (iq, ik, ik)):
                if part.shape[1] != whole.shape[-2]:   # query heads summed to their K/V head
                    part = part.view(part.shape[0], whole.shape[-2], groups, part.shape[-1]).sum(2)
                whole[i] = part.to(whole.dtype)
        return dq, dk, dv


@pytest.mark.parametrize("kv_heads,window,docs,groups", [
    (2, 0, False, 1), (4, 6, False, 2), (2, 0, True, 1), (2, 0, True, 2), (1, 5, True, 1),
])
def test_flash_calls_against_its_contract(monkeypatch, kv_heads, window, docs, groups):
    """The CUDA branch's FA2 calls (dense and over packed documents, whole and in groups of heads),
    run by the CPU stand-in, give what the CPU kernels give with the dense masks the CPU path builds:
    this checks the operands' layouts, the variable-length batch and the lse's layout both ways (a
    mistake there mixes rows or documents: errors of the values' size). The CPU kernels round the
    probabilities and their gradients to bf16 before the second matmuls (as FA2 does), the stand-in
    does not: a few bf16 roundings of the largest value apart (measured: at most 2^-7.2 of it)."""
    doc_pos = None
    if docs:   # documents of 5, 11 and 16 tokens in row 0, one of 32 in row 1
        from autosp.runtime.documents import doc_positions
        pos = torch.tensor([[*range(5), *range(11), *range(16)], list(range(S))])
        doc_pos = doc_positions(pos, None)
    q, k, v, dout = _inputs("cpu", torch.bfloat16, kv_heads)
    run = [q, k, v, True, D ** -0.5, H // kv_heads, window]
    want = [*kernels.attention(*run, doc_pos=doc_pos)]
    want += kernels.attention_grad(dout, q, k, v, *want, True, D ** -0.5, H // kv_heads, window, doc_pos=doc_pos)

    calls = []
    flash = kernels._flash
    monkeypatch.setattr(kernels, "_cuda", lambda x: True)
    monkeypatch.setattr(kernels, "aten", _FA2Contract())
    monkeypatch.setattr(kernels, "head_groups", lambda *a: groups)
    monkeypatch.setattr(kernels, "_flash", lambda *a: calls.append(a[-1]) or flash(*a))
    got = [*kernels.attention(*run, doc_pos=doc_pos)]
    got += kernels.attention_grad(dout, q, k, v, *got, True, D ** -0.5, H // kv_heads, window, doc_pos=doc_pos)

    assert len(calls) == groups and all((c is not None) == docs for c in calls)
    for name, g, w in zip(("out", "lse", "dq", "dk", "dv"), got, want):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), name
        err = (g.float() - w.float()).abs()
        assert float(err.max()) <= 2 ** -6 * float(w.float().abs().max()), (name, float(err.max()))


class _Mesh:
    """What ring_attention's block helpers ask of a mesh: rank `index` of `n` in one group."""

    def __init__(self, n: int, index: int, zigzag: bool):
        self.n, self.i, self.zz = n, index, zigzag

    def index(self, group: str) -> int:
        return self.i

    def size(self, group: str) -> int:
        return self.n

    def zigzag(self, group: str) -> bool:
        return self.zz


def _block(x: torch.Tensor, n: int, i: int, zigzag: bool, dim: int) -> torch.Tensor:
    """Rank i's rows of x along dim, as the mesh shards the sequence."""
    if not zigzag:
        return x.chunk(n, dim)[i]
    c = x.chunk(2 * n, dim)
    return torch.cat([c[i], c[2 * n - 1 - i]], dim)


@pytest.mark.parametrize("zigzag", [False, True])
def test_ring_blocks_over_documents_against_contract(monkeypatch, zigzag):
    """Every ring block a rank attends (3 ranks, 48 positions) with packed documents, as FA2's
    variable-length batch through the CPU stand-in, against the CPU kernels with the block's dense
    document mask: documents crossing blocks, queries that see nothing of a block (out 0, lse -inf),
    zigzag's two chunks; the backward with the whole sequence's out and lse, as the ring runs it."""
    from autosp.runtime import ring_attention
    from autosp.runtime.documents import doc_positions
    n, s = 3, 48
    g = torch.Generator().manual_seed(1)
    q, k, v, dout = (torch.randn(B, s, h, D, generator=g).to(torch.bfloat16).transpose(1, 2) for h in (H, 2, 2, H))
    pos = torch.tensor([[*range(5), *range(20), *range(3), *range(20)], [*range(30), *range(18)]])
    doc_pos = doc_positions(pos, None)
    flags = (D ** -0.5, H // 2)
    whole_out, whole_lse = kernels.attention(q, k, v, True, *flags, doc_pos=doc_pos)
    cut = lambda x, i, dim=2: _block(x, n, i, zigzag, dim)  # noqa: E731
    runs = 0
    for i in range(n):
        mesh = _Mesh(n, i, zigzag)
        for j in range(n):
            part = ring_attention._part(mesh, "sp", True, 0, s // n, j)
            if part is None:
                continue
            qs, ks, diagonal, offset = part
            docs = ring_attention._documents(mesh, "sp", cut(doc_pos, i, 1), qs, ks, j, s // n)
            operands = [cut(q, i)[:, :, qs], cut(k, j)[:, :, ks], cut(v, j)[:, :, ks]]
            grad_in = [cut(dout, i)[:, :, qs], operands[0], *operands[1:], cut(whole_out, i)[:, :, qs],
                       cut(whole_lse, i)[..., qs]]
            results = []
            with monkeypatch.context() as m:
                for stand_in in (False, True):
                    if stand_in:
                        m.setattr(kernels, "_cuda", lambda x: True)
                        m.setattr(kernels, "aten", _FA2Contract())
                    out, lse = kernels.attention(*operands, diagonal, *flags, 0, offset, **docs)
                    results.append([out, lse, *kernels.attention_grad(*grad_in, diagonal, *flags, 0, offset, **docs)])
            runs += 1
            want, got = results
            assert torch.equal(got[1].isinf(), want[1].isinf()), (i, j)
            for name, a, w in zip(("out", "lse", "dq", "dk", "dv"), got, want):
                a, w = (x.float().nan_to_num(neginf=0.0) for x in (a, w))
                assert float((a - w).abs().max()) <= 2 ** -6 * float(w.abs().max()), (name, i, j)
    assert runs == (9 if zigzag else 6)
