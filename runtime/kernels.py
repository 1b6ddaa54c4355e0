"""Attention kernels behind sp.attention / sp.attention_grad: ATen's fused SDPA entry points,
chosen by device. On CUDA, fp16/bf16 attention runs FlashAttention-2, which reads grouped K/V at
their own head count, takes a causal sliding window as two bounds and packed documents as its
variable-length batch (each document a sequence of its own, in a ring block too); fp32, and a ring
block's documents under a window, run the memory-efficient kernel, which wants K/V repeated to the
query heads and a dense additive mask. `lse` is the softmax statistics [B, H, rows of q] (fp32),
kept for the backward. `workspace_bytes` says what each CUDA kernel holds beside its operands and
results, for the memory plan. Dropout with the program's own generator."""
from __future__ import annotations

from typing import NamedTuple

import torch

aten = torch.ops.aten

CUDA_BIAS_ALIGN = 16   # the efficient-attention kernel wants the bias rows 16-element aligned
CUDA_LSE_ALIGN = 32    # and keeps the statistics padded to 32 rows
FLASH_DTYPES = (torch.float16, torch.bfloat16)


def cuda_flash(half: bool, head_dim: int, rows_q: int, rows_k: int, causal: bool, window: int, offset: int,
               docs: bool, block: bool = False, rocm: bool = False) -> tuple[bool, tuple[int, int] | None] | None:
    """FlashAttention-2's (is_causal, (left, right) window or None) for an attention on CUDA, or None:
    the memory-efficient kernel runs it. FA2 takes fp16/bf16 with a head dim a multiple of 8 up to 256;
    its causal mask and window are aligned to the last rows of q and k, so query row a (position a +
    offset from k's first) seeing keys b with 0 <= a + offset - b < window is the window (left, right)
    around row a + rows_k - rows_q when both bounds are >= 0. docs: packed documents, each with its rows
    of k a sequence of FA2's variable-length batch (varlen_batch()): over the whole sequence causal
    within each; in a ring block (`block`, its rows' positions given) causal on the diagonal, and
    under a window a mask, as a block's rows need not be consecutive positions (zigzag). ROCm's build
    takes neither windows nor documents."""
    if not half or head_dim % 8 or head_dim > 256 or rocm and (window or docs):
        return None
    if docs and block and window:
        return None
    causal = causal or docs and not block
    if not window:
        if not causal:
            return False, None
        return (True, None) if rows_q == rows_k else None   # top-left causal (the kernels' convention)
    shift = rows_k - rows_q
    left, right = window - 1 + shift - offset, offset - shift
    return (False, (left, right)) if left >= 0 and right >= 0 else None


def op_flash(half: bool, head_dim: int, rows: int, causal: bool, window: int, docs: bool, ring: bool) -> bool:
    """Whether CUDA runs an attention op (rows of q and k each) with FlashAttention-2, as _flash_args
    decides at its calls; a ring's judged by its diagonal block."""
    return cuda_flash(half, head_dim, rows, rows, causal, window, 0, docs, block=ring) is not None


def _cuda(x: torch.Tensor) -> bool:
    """Whether x is on a CUDA (or ROCm) device: the CUDA kernels' branch (a test takes it on `meta`)."""
    return x.device.type == "cuda"


def _flash_args(q: torch.Tensor, k: torch.Tensor, causal: bool, window: int, offset: int,
                doc_pos: torch.Tensor | None, positions: tuple | None) -> tuple[bool, tuple[int, int] | None] | None:
    """cuda_flash() for these operands (positions given: a ring block's)."""
    if not _cuda(q) or q.dtype not in FLASH_DTYPES:
        return None
    return cuda_flash(True, q.shape[-1], q.shape[2], k.shape[2], causal, window, offset, doc_pos is not None,
                      block=positions is not None, rocm=torch.version.hip is not None)


class Varlen(NamedTuple):
    """FlashAttention's variable-length batch: cumulative rows of q and of k per sequence (int32, on
    the device), the longest of each, and which rows of q see any key ([B, rows of q], None: all)."""
    cu_q: torch.Tensor
    cu_k: torch.Tensor
    max_q: int
    max_k: int
    seen: torch.Tensor | None


def varlen_batch(doc_pos: torch.Tensor, rows_k: int, positions: tuple[torch.Tensor, torch.Tensor] | None,
                 device: torch.device) -> Varlen:
    """The variable-length batch of packed documents, rows of q and k flattened over the batch: each
    run of q's rows in one document (its start: position - doc_pos) is a sequence, with k's rows from
    that start up to the next run's (k's rows before a batch row's first run: a sequence without
    queries). positions: the rows' positions (default: q's are k's, 0, 1, ...), ascending in q and
    in k, as in contiguous blocks and zigzag's two chunks: a document's rows are consecutive in both,
    and a block before q's (a ring's) reaches only the first run's document. Read on the host (a
    sync): FA2 sizes its grid by the longest sequence, a number there."""
    b, rows_q = doc_pos.shape
    qpos, kpos = (torch.arange(rows_q), torch.arange(rows_k)) if positions is None else (p.cpu() for p in positions)
    start = qpos - doc_pos.cpu()
    new = torch.ones_like(start, dtype=torch.bool)
    new[:, 1:] = start[:, 1:] != start[:, :-1]
    row, first_q = new.nonzero(as_tuple=True)   # the runs, in order
    s = start[row, first_q]
    turn = row[1:] != row[:-1]   # between two runs, the batch row changes
    last, opens = torch.cat([turn, torch.ones(1, dtype=torch.bool)]), torch.cat([torch.ones(1, dtype=torch.bool), turn])
    k_lo = torch.searchsorted(kpos, s)
    k_hi = torch.where(last, rows_k, torch.searchsorted(kpos, s.roll(-1)))
    q_len = torch.where(last, rows_q, first_q.roll(-1)) - first_q
    lens_q = torch.stack([torch.zeros_like(q_len), q_len], 1).flatten()
    lens_k = torch.stack([torch.where(opens, k_lo, 0), k_hi - k_lo], 1).flatten()
    keep = (lens_q > 0) | (lens_k > 0)
    lens_q, lens_k = lens_q[keep], lens_k[keep]
    seen = ((k_hi > k_lo)[new.flatten().cumsum(0) - 1]).view(b, rows_q)
    cu = [torch.cat([torch.zeros(1, dtype=torch.long), x.cumsum(0)]).to(device=device, dtype=torch.int32)
          for x in (lens_q, lens_k)]
    # the longest at least 2: with 1, FA2 reads one query per sequence (it folds grouped heads into the
    # rows), which a sequence without queries breaks; a bound above the longest only sizes the grid
    return Varlen(*cu, max(2, int(lens_q.max())), int(lens_k.max()), None if bool(seen.all()) else seen.to(device))


def _round(n: int, m: int) -> int:
    return -(-n // m) * m


def head_groups(batch: int, heads: int, kv_heads: int, rows_k: int) -> int:
    """How many groups of K/V heads a CUDA attention runs as, one call each over its query heads: the
    kernels' workspace grows with the heads of a call, and a call still fills the GPU with fewer heads
    when the rows are many. The most groups (a divisor of kv_heads) that leave each call 1024 blocks
    of 128 keys x heads."""
    blocks = -(-rows_k // 128) * batch * heads
    return max(n for n in range(1, kv_heads + 1) if n == 1 or (kv_heads % n == 0 and blocks // n >= 1024))


def workspace_bytes(batch: int, heads: int, kv_heads: int, rows_q: int, rows_k: int, head_dim: int, itemsize: int,
                    flash: bool, backward: bool, docs: bool, window: int) -> int:
    """Bytes the CUDA attention (backward) holds beside its operands and results, run as
    head_groups() calls: one call's workspace and, over several, its results before they are copied
    into the whole ones. FlashAttention-2's backward: an fp32 dq accumulator [B, rows_q to 128, H,
    D to 32], the fp32 softmax row sums and, with grouped K/V, dk / dv at the query heads before their
    sum (over packed documents each document's rows go to 128: unknown here, not counted). The
    efficient kernel: K/V repeated to the query heads; in the backward their gradients at the query
    heads too, an fp32 dq accumulator, the statistics padded to 32 rows and dout made contiguous, and
    _masking()'s dense mask (documents': one per batch row; a window's: one) with the bool matrices
    that build it."""
    groups = head_groups(batch, heads, kv_heads, rows_k)
    h, hk = heads // groups, kv_heads // groups
    grouped = h != hk
    q = batch * h * rows_q * head_dim * itemsize         # one call's q (and out, dout, dq)
    kv = batch * hk * rows_k * head_dim * itemsize       # one call's k (and v, dk, dv)
    wide = batch * h * rows_k * head_dim * itemsize      # one call's k at the query heads
    if flash and not backward:
        kernel = 0
    elif flash:
        kernel = 4 * batch * h * _round(rows_q, 128) * (1 + _round(head_dim, 32 if head_dim <= 128 else 64)) \
            + 2 * wide * grouped
    elif backward:
        kernel = 4 * wide * grouped + 4 * batch * h * (rows_q * head_dim + 2 * _round(rows_q, CUDA_LSE_ALIGN)) \
            + q * (groups > 1)
    else:
        kernel = 2 * wide * grouped
    results = (q + 2 * kv if backward else q + 4 * batch * h * rows_q) if groups > 1 else 0
    mask_rows = 0 if flash else batch if docs else int(bool(window))
    mask = mask_rows * rows_q * (_round(rows_k, CUDA_BIAS_ALIGN) * itemsize + rows_k) \
        + rows_q * rows_k * bool(mask_rows)
    return kernel + results + mask


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def _additive(hide: torch.Tensor, q: torch.Tensor, align: int) -> torch.Tensor:
    """The additive scores mask (-inf where `hide`, [..., rows of q, rows of k]) in q's dtype, each row
    padded to `align` keys and sliced back (a view)."""
    sk = hide.shape[-1]
    bias = torch.zeros(*hide.shape[:-1], _round(sk, align), dtype=q.dtype, device=q.device)[..., :sk]
    return bias.masked_fill_(hide, float("-inf"))


def _hidden(qpos: torch.Tensor, kpos: torch.Tensor, first: torch.Tensor | None, window: int) -> torch.Tensor:
    """Which keys each query row does not see, bool [..., rows of q, rows of k], from the rows' positions
    qpos / kpos (compared, without a matrix of distances): keys after it; keys before `first` [...,
    rows of q] (its document's first position), if given; keys `window` or more back, if a window."""
    hide = kpos > qpos[:, None]
    if first is not None:
        hide = torch.lt(kpos, first[..., None]).bitwise_or_(hide)
    if window:
        hide |= kpos <= (qpos - window)[:, None]
    return hide


def _window_bias(q: torch.Tensor, k: torch.Tensor, window: int, offset: int, align: int = 1) -> torch.Tensor:
    """Additive scores mask of a causal sliding window: query row a (position a + offset) sees key row
    b iff 0 <= a + offset - b < window; broadcast over batch and heads. Dense: [rows of q, rows of k]."""
    sq, sk = q.shape[2], k.shape[2]
    hide = _hidden(torch.arange(sq, device=q.device) + offset, torch.arange(sk, device=q.device), None, window)
    return _additive(hide, q, align).expand(q.shape[0], q.shape[1], sq, sk)


def _doc_bias(q: torch.Tensor, window: int, doc_pos: torch.Tensor, positions: tuple[torch.Tensor, torch.Tensor],
              align: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(additive scores mask, which query rows see any key) of causal attention within documents: query
    row a (at position qpos[a]) sees key row b iff 0 <= qpos[a] - kpos[b] <= doc_pos[:, a] (its own
    document, up to itself) and, under a window, < window. Dense: [batch, rows of q, rows of k]."""
    qpos, kpos = positions
    hide = _hidden(qpos, kpos, qpos - doc_pos, window)
    return _additive(hide, q, align)[:, None].expand(q.shape[0], q.shape[1], *hide.shape[1:]), ~hide.all(-1)


def _masking(q: torch.Tensor, k: torch.Tensor, causal: bool, window: int, offset: int,
             doc_pos: torch.Tensor | None, positions: tuple[torch.Tensor, torch.Tensor] | None) -> tuple:
    """(bias, is_causal, rows that see a key or None: all) for the SDPA entry points: a window's or the
    documents' mask holds its causality. positions: the global positions of q's and k's rows (default:
    consecutive, q's first at `offset` from k's)."""
    align = CUDA_BIAS_ALIGN if _cuda(q) else 1
    if doc_pos is not None:
        if positions is None:
            positions = (torch.arange(q.shape[2], device=q.device) + offset, torch.arange(k.shape[2], device=q.device))
        bias, seen = _doc_bias(q, window, doc_pos, positions, align)
        return bias, False, seen
    if not window:
        return None, causal, None
    return _window_bias(q, k, window, offset, align), False, None


def _whole_like(part: torch.Tensor, groups: int) -> torch.Tensor:
    """The result `part` is one group of (dim 1, heads), whole, in part's layout: a [B, H, S, D] view
    of a [B, S, H, D] buffer (the kernels' out, FlashAttention's gradients) when part is one (a head
    stride no larger than the row stride: with one head a group, both are D)."""
    shape = list(part.shape)
    shape[1] *= groups
    if part.dim() == 4 and part.stride(1) <= part.stride(2) and part.transpose(1, 2).is_contiguous():
        return part.new_empty([shape[0], shape[2], shape[1], shape[3]]).transpose(1, 2)
    return part.new_empty(shape)


def _in_groups(fn, groups: int, wide: list[torch.Tensor | None], narrow: list[torch.Tensor]) -> tuple:
    """fn(*wide, *narrow) with the query-head operands `wide` (None: absent) and the K/V-head ones
    `narrow` cut into `groups` along the heads (dim 1), each call's results written into the whole
    ones. Query head h reads K/V head h // (its group size): a group's heads are consecutive."""
    if groups == 1:
        return tuple(fn(*wide, *narrow))
    cuts = [[None] * groups if x is None else x.chunk(groups, 1) for x in (*wide, *narrow)]
    whole = None
    for g in range(groups):
        part = fn(*(c[g] for c in cuts))
        whole = whole or [_whole_like(r, groups) for r in part]
        for w, r in zip(whole, part):
            w.narrow(1, g * r.shape[1], r.shape[1]).copy_(r)
    return tuple(whole)


def _rows(x: torch.Tensor, docs: Varlen | None) -> torch.Tensor:
    """[B, H, S, D] as FlashAttention takes it: [B, S, H, D], or over documents [B x S, H, D] (a view
    where x is one of a [B, S, H, D] buffer, as projections make them)."""
    x = x.transpose(1, 2)
    return x if docs is None else x.reshape(-1, *x.shape[2:])


def _heads(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """FlashAttention's result x (_rows' layout) as a [B, H, S, D] view, `like` one of its operands."""
    b, h, s, d = like.shape
    return x.view(b, s, h, d).transpose(1, 2)


def _lengths(q: torch.Tensor, k: torch.Tensor, docs: Varlen | None) -> tuple:
    """(cu_seqlens_q, cu_seqlens_k, max_q, max_k) of the FA2 entry points."""
    return (None, None, q.shape[2], k.shape[2]) if docs is None else docs[:4]


def _flash(q, k, v, scale: float, args: tuple[bool, tuple[int, int] | None], docs: Varlen | None):
    causal, window = args
    left, right = window if window else (None, None)
    out, lse, *_ = aten._flash_attention_forward(
        _rows(q, docs), _rows(k, docs), _rows(v, docs), *_lengths(q, k, docs), 0.0, causal, False, scale=scale,
        window_size_left=left, window_size_right=right)
    if docs is not None:   # the statistics [H, B x S]
        lse = lse.view(q.shape[1], q.shape[0], q.shape[2]).transpose(0, 1)
    return _heads(out, q), lse


def _flash_grad(dout, q, out, lse, k, v, scale: float, args: tuple[bool, tuple[int, int] | None],
                docs: Varlen | None):
    causal, window = args
    left, right = window if window else (None, None)
    o, do = (x if x.stride(-1) == 1 else x.contiguous() for x in (_rows(out, docs), _rows(dout, docs)))
    lse = (lse if docs is None else lse.transpose(0, 1).reshape(lse.shape[1], -1)).contiguous()
    rng = torch.empty(2, dtype=torch.uint64, device=q.device)   # read only under dropout
    dq, dk, dv = aten._flash_attention_backward(
        do, _rows(q, docs), _rows(k, docs), _rows(v, docs), o, lse, *_lengths(q, k, docs), 0.0, causal,
        rng, rng, scale=scale, window_size_left=left, window_size_right=right)
    return _heads(dq, q), _heads(dk, k), _heads(dv, v)


def _efficient(q, bias, k, v, causal: bool, scale: float, kv_groups: int):
    k, v = _repeat_kv(k, kv_groups), _repeat_kv(v, kv_groups)
    out, lse, *_ = aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, causal, scale=scale)
    return out, lse[..., :q.shape[2]]


def _efficient_grad(dout, q, out, lse, bias, k, v, causal: bool, scale: float, kv_groups: int):
    hk = k.shape[1]
    k, v = _repeat_kv(k, kv_groups), _repeat_kv(v, kv_groups)
    lse = torch.nn.functional.pad(lse, (0, _round(lse.shape[-1], CUDA_LSE_ALIGN) - lse.shape[-1]))
    zero = torch.zeros((), dtype=torch.int64, device=q.device)
    dq, dk, dv, _ = aten._scaled_dot_product_efficient_attention_backward(
        dout, q, k, v, bias, out, lse, zero, zero, 0.0, [True, True, True, False], causal, scale=scale)
    if kv_groups > 1:
        b, _, s, d = dk.shape
        dk = dk.view(b, hk, kv_groups, s, d).sum(2)
        dv = dv.view(b, hk, kv_groups, s, d).sum(2)
    return dq, dk, dv


def _groups(q: torch.Tensor, k: torch.Tensor) -> int:
    return head_groups(q.shape[0], q.shape[1], k.shape[1], k.shape[2])


def attention(q, k, v, causal: bool, scale: float, kv_groups: int, window: int = 0, offset: int = 0,
              doc_pos: torch.Tensor | None = None, positions: tuple[torch.Tensor, torch.Tensor] | None = None):
    """window > 0: a causal sliding window (the causality is in the mask), `offset` the position of
    q's first row minus k's (ring attention's blocks). doc_pos [B, rows of q]: each query's position in
    its document, which it attends no further back than (positions: see _masking). A query row that
    sees no key of a ring block (given positions) gives out 0 and lse -inf (nothing to merge); over
    the whole sequence every row sees its own key."""
    flash = _flash_args(q, k, causal, window, offset, doc_pos, positions)
    if flash is not None:
        docs = None if doc_pos is None else varlen_batch(doc_pos, k.shape[2], positions, q.device)
        out, lse = _in_groups(lambda q, k, v: _flash(q, k, v, scale, flash, docs), _groups(q, k), [q], [k, v])
        seen = None if docs is None else docs.seen   # FA2 gives such rows out 0 and lse +inf
    else:
        bias, causal, seen = _masking(q, k, causal, window, offset, doc_pos, positions)
        if _cuda(q):
            out, lse = _in_groups(lambda *x: _efficient(*x, causal, scale, kv_groups), _groups(q, k), [q, bias],
                                  [k, v])
        else:   # the CPU flash kernel takes grouped K/V as they are
            out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, attn_mask=bias,
                                                                        scale=scale)[:2]
    if seen is not None and positions is not None:
        out = out.masked_fill(~seen[:, None, :, None], 0.0)
        lse = lse.masked_fill(~seen[:, None, :], float("-inf"))
    return out, lse


def attention_grad(dout, q, k, v, out, lse, causal: bool, scale: float, kv_groups: int, window: int = 0,
                   offset: int = 0, doc_pos: torch.Tensor | None = None,
                   positions: tuple[torch.Tensor, torch.Tensor] | None = None):
    flash = _flash_args(q, k, causal, window, offset, doc_pos, positions)
    if flash is not None:
        docs = None if doc_pos is None else varlen_batch(doc_pos, k.shape[2], positions, q.device)
        return _in_groups(lambda *x: _flash_grad(*x, scale, flash, docs), _groups(q, k), [dout, q, out, lse], [k, v])
    bias, causal, _ = _masking(q, k, causal, window, offset, doc_pos, positions)
    if not _cuda(q):
        return aten._scaled_dot_product_flash_attention_for_cpu_backward(
            dout, q, k, v, out, lse.contiguous(), 0.0, causal, attn_mask=bias, scale=scale)
    return _in_groups(lambda *x: _efficient_grad(*x, causal, scale, kv_groups), _groups(q, k),
                      [dout, q, out, lse, bias], [k, v])


def dropout(x: torch.Tensor, p: float, train: bool | None,
            generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """aten.native_dropout drawing from `generator` (the ATen op takes none), computed as ATen's CPU
    kernel computes it: the same (output, bool mask) for the same generator state."""
    if train is False:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    keep = 1.0 - p
    mask = torch.empty_like(x, dtype=torch.bool).bernoulli_(keep, generator=generator)
    return x.mul(mask).mul_(1.0 / keep if keep else 0.0), mask
