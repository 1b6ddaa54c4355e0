"""sp-tile-sequence: run the token-local work whose intermediates are much wider than the hidden size
in chunks of tokens, forward and backward, so those intermediates are never materialized whole:
  - the LM head + log-softmax + cross-entropy chain, in chunks of token rows (this file): no
    [tokens, vocab] logits or gradient;
  - the wide token-local regions, i.e. the MLPs, in chunks of each sequence's positions
    (sp_tile_sequence_mlp.py, run after the head): no [tokens, intermediate] activation or gradient.
Option: chunks=N forces N chunks for the head and for every region; without it each picks its own.

Runs on the joint step function (after sp-partition-sequence, canonicalize, cse; before
sp-plan-remat). The head chain is matched by dataflow from each `nll_loss_forward`:

  forward   logits = mm(h [T,D], wt [D,V]) -> row-preserving views -> _log_softmax(dim 1) [T,V]
            -> nll_loss_forward (reduction sum, or mean)
  backward  nll_loss_backward(g, logp, ...) -> _log_softmax_backward_data -> row-preserving views
            -> G [T,V], read only by  mm(G, X)        (d hidden: rows, concatenated)
                                      mm(t(G), Y[T,K]) (d weight: chunk contributions summed)
                                      mm(Z[K,T], G)    (d weight, other orientation: summed)

and rewritten, for chunk c of rows [s_c, e_c) (`slice.Tensor` on dim 0), into
  forward   nll_c = nll_loss_forward(_log_softmax(mm(h[s:e], wt)), target[s:e], reduction=sum);
            the loss output is the sum of the chunk sums, total_weight the sum of the chunk
            weights (a mean loss divides them), so the all-reduce + global division the partition
            pass built around the loss read exactly what they read before;
  backward  the chunk's logits are recomputed (mm + _log_softmax of the same rows, bit-identical
            to the forward's), then nll_loss_backward with the unchanged global total_weight,
            _log_softmax_backward_data, and the consumers per chunk: d hidden rows joined with
            `cat` along tokens, d weight chunk contributions accumulated (`addmm`).
The backward recomputes its own chunk logits instead of reading the forward's, so no remat policy
saves any logits and only the [T/N, V] tiles of one chunk (logits, log-probabilities, their
gradient) are live at a time, in the forward and in the backward. The cost is one head matmul per
step (the sac policy would recompute it anyway). The weight-gradient contributions are summed with
`addmm` (acc + t(dlogits_c) @ h_c), so no separate partial product is live either.

Chunks: chunks=N gives N balanced chunks (sizes floor(T/N) or ceil(T/N), the larger first), so N
need not divide T; N > T is an error. Without the option the pass picks the smallest N such that a
[T/N, V] fp32 logits tile is at most twice a [T, D] activation (in the activation's dtype):
N = ceil(V * 4 / (2 * D * itemsize)), lowered so that no tile is below `floor` bytes (default
4 MiB: a smaller tile saves less memory than its chunk's repeated ops cost in dispatch or launches;
sp-pipeline with a budget lowers it to 1/64 of the budget),
clamped to [1, T]. N = 1 leaves the IR unchanged. A chain
that does not match (another reader of the logits, a consumer of its gradient other than the
above, a non-row-preserving reshape) is left as it is: the pass does nothing for it.

Created ops carry the location (and `sp.layout`) of the op they replace, so sp-plan-remat keeps
them in the right layer segment. Every created ATen op is checked on meta tensors. The numerics are
eager's up to the order of the chunked sums (fp32 rounding).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from torch_mlir import ir

from .aten_call import ELEMENT_TYPES
from .base import Bytes, Pass, PassError, option
from .ops import A, CAST, IDENTITY, RESHAPE
from .sp_tile_sequence_mlp import tile_wide_regions
from .tiling import DEFAULT_FLOOR, Builder, NoMatch, auto_chunks, bounds, erase_all, hoist_plan, owner, record, uses
from .torch_ir import body_ops, const_none, const_value, dtype_str, func_of, funcs_of, is_tensor, op_name, shape, \
    with_shape



def _const(v: ir.Value):
    ok, val = const_value(v)
    if not ok:
        raise NoMatch("a non-constant operand where a constant is expected")
    return val


def _cast(op) -> bool:
    """A dtype cast of the logits or their gradient (mixed precision: bf16 matmul, fp32 loss)."""
    return op_name(op) == CAST and is_tensor(op.results[0]) and shape(op.results[0]) == shape(op.operands[0])


def _row_view(op) -> bool:
    """A reshape that keeps every token row: same last dim, same number of rows (or an identity or a
    dtype cast)."""
    name = op_name(op)
    if name in IDENTITY or _cast(op):
        return True
    if name not in RESHAPE or not is_tensor(op.results[0]):
        return False
    i, o = shape(op.operands[0]), shape(op.results[0])
    return bool(i) and bool(o) and i[-1] == o[-1] and math.prod(i[:-1]) == math.prod(o[:-1])


def _transpose_2d(op) -> bool:
    name = op_name(op)
    if len(op.operands) < 1 or not is_tensor(op.operands[0]) or len(shape(op.operands[0])) != 2:
        return False
    if name == A + "t":
        return True
    if name == A + "transpose.int":
        ok0, d0 = const_value(op.operands[1])
        ok1, d1 = const_value(op.operands[2])
        return ok0 and ok1 and {d0 % 2, d1 % 2} == {0, 1}
    if name == A + "permute":
        ok, dims = const_value(op.operands[1])
        return ok and [d % 2 for d in dims] == [1, 0]
    return False


def _is_2d(v: ir.Value, rows: int, cols: int) -> bool:
    return is_tensor(v) and shape(v) == [rows, cols]


@dataclass
class Chain:
    """One matched head + loss chain (ops of the joint step function)."""
    mm: ir.Operation                    # logits = mm(h, wt)
    fwd_views: list                     # row-preserving views from the logits to the log-softmax
    lsm: ir.Operation                   # _log_softmax
    nll: ir.Operation                   # nll_loss_forward
    bwd: ir.Operation | None = None     # nll_loss_backward
    lsb: ir.Operation | None = None     # _log_softmax_backward_data
    g_views: list = field(default_factory=list)   # views (and unread transposes) of the gradient
    rows: list = field(default_factory=list)      # mm(G, X): G cast by g_cast, if any
    left: list = field(default_factory=list)      # mm(Z, G)
    tleft: list = field(default_factory=list)     # (t(G), mm(t(G), Y))

    @property
    def cast(self) -> ir.Operation | None:
        """The dtype cast between the head matmul and the log-softmax (at most one)."""
        return next((o for o in self.fwd_views if _cast(o)), None)

    @property
    def g_cast(self) -> ir.Operation | None:
        """The dtype cast between the logits gradient and its matmuls (at most one)."""
        return next((o for o in self.g_views if _cast(o)), None)

    @property
    def tokens(self) -> int:
        return shape(self.lsm.results[0])[0]

    @property
    def vocab(self) -> int:
        return shape(self.lsm.results[0])[1]

    def ops(self) -> list:
        out = [self.mm, *self.fwd_views, self.lsm, self.nll]
        if self.bwd is not None:
            out += [self.bwd, self.lsb, *self.g_views, *self.rows, *self.left]
            for t, mm in self.tleft:
                out += [t, mm]
        return list(dict.fromkeys(out))   # a transpose read by two matmuls is listed once


def match(nll) -> Chain:
    """The tileable chain ending at this nll_loss_forward, or NoMatch."""
    logp, target = nll.operands[0], nll.operands[1]
    if _const(nll.operands[3]) not in (1, 2):
        raise NoMatch("the loss is not reduced (reduction none)")
    lsm = owner(logp)
    if lsm is None or op_name(lsm) != A + "_log_softmax":
        raise NoMatch("the loss does not read a _log_softmax")
    if len(shape(logp)) != 2 or _const(lsm.operands[1]) not in (1, -1) or _const(lsm.operands[2]):
        raise NoMatch("the log-softmax is not over the last dim of a [tokens, vocab] tensor")
    t, v = shape(logp)
    if shape(target) != [t]:
        raise NoMatch("the target is not one label per token row")
    # forward: log-softmax input <- row-preserving views <- mm(h, wt)
    x, fwd_views = lsm.operands[0], []
    while True:
        if len(uses(x)) != 1:
            raise NoMatch("the logits have another reader")
        o = owner(x)
        if o is None:
            raise NoMatch("the logits are a function argument")
        if op_name(o) == A + "mm":
            break
        if not _row_view(o):
            raise NoMatch(f"the logits come from {op_name(o)}, not a row-preserving view of mm")
        fwd_views.append(o)
        x = o.operands[0]
    mm = o
    if sum(map(_cast, fwd_views)) > 1:
        raise NoMatch("the logits are cast more than once")
    if not _is_2d(mm.results[0], t, v) or len(shape(mm.operands[0])) != 2:
        raise NoMatch("the head matmul is not [tokens, hidden] x [hidden, vocab]")
    chain = Chain(mm, fwd_views[::-1], lsm, nll)
    # readers of the log-probabilities: the loss, and its gradient
    for user, i in uses(logp):
        name = op_name(user)
        if user == nll:
            continue
        if name == A + "nll_loss_backward" and i == 1 and chain.bwd is None:
            chain.bwd = user
        elif name == A + "_log_softmax_backward_data" and i == 1 and chain.lsb is None:
            chain.lsb = user
        else:
            raise NoMatch(f"the log-probabilities are also read by {name}")
    if chain.bwd is None and chain.lsb is None:
        return chain
    bwd, lsb = chain.bwd, chain.lsb
    if bwd is None or lsb is None or lsb.operands[0] != bwd.results[0] or len(uses(bwd.results[0])) != 1:
        raise NoMatch("the loss gradient is not nll_loss_backward -> _log_softmax_backward_data")
    if _const(bwd.operands[4]) not in (1, 2) or len(shape(bwd.operands[0])) != 0:
        raise NoMatch("the loss gradient is not of a reduced loss")
    if shape(bwd.operands[2]) != [t] or _const(lsb.operands[2]) not in (1, -1):
        raise NoMatch("the loss gradient is not per token row")

    cast = chain.cast is not None

    def consumers(g: ir.Value, cast_back: bool = False) -> None:
        for user, i in uses(g):
            if _row_view(user):
                if _cast(user) and (cast_back or not cast):
                    raise NoMatch("the logits gradient is cast other than back to the logits' dtype once")
                chain.g_views.append(user)
                consumers(user.results[0], cast_back or _cast(user))
            elif not _is_2d(g, t, v):
                raise NoMatch(f"the logits gradient is read as {shape(g)} by {op_name(user)}")
            elif cast != cast_back:
                raise NoMatch(f"the logits gradient is read by {op_name(user)} before it is cast back")
            elif op_name(user) == A + "mm" and i == 0 and user.operands[1] != g:
                chain.rows.append(user)
            elif op_name(user) == A + "mm" and i == 1 and user.operands[0] != g:
                chain.left.append(user)
            elif _transpose_2d(user) and i == 0:
                if not uses(user.results[0]):
                    chain.g_views.append(user)    # dead: erased with the chain
                for mm_user, j in uses(user.results[0]):
                    if op_name(mm_user) != A + "mm" or j != 0 or shape(mm_user.operands[1])[0] != t:
                        raise NoMatch(f"the transposed logits gradient is read by {op_name(mm_user)}")
                    chain.tleft.append((user, mm_user))
            else:
                raise NoMatch(f"the logits gradient is read by {op_name(user)}")

    consumers(lsb.results[0])
    return chain


def default_chunks(chain: Chain, floor: int) -> int:
    """The smallest N with a [T/N, V] fp32 tile <= 2 x a [T, D] activation, no tile below `floor`
    bytes, in [1, T]."""
    h = chain.mm.operands[0]
    d = shape(h)[1]
    itemsize = ELEMENT_TYPES[dtype_str(h.type)].itemsize
    n = math.ceil(chain.vocab * 4 / (2 * d * itemsize))
    return auto_chunks(n, chain.tokens * chain.vocab * 4, floor, chain.tokens)


class Tiler(Builder):
    """The chain's rewrite. Its constants are shared by all its ops: the forward precedes the backward."""

    def __init__(self, chain: Chain, n: int):
        super().__init__()
        self.c, self.n = chain, n
        self.ranges = bounds(chain.tokens, n)
        self.slices: dict[tuple[ir.Value, int], list[ir.Value]] = {}

    # ------------------------------------------------------------------ building blocks
    def slice_of(self, like, v: ir.Value, dim: int) -> list[ir.Value]:
        """v cut into the chunks' row ranges along dim (shared by every reader)."""
        key = (v, dim)
        if key not in self.slices:
            out = []
            for s, e in self.ranges:
                sh = shape(v)
                sh[dim] = e - s
                ops = [self.const(like, dim), self.const(like, s), self.const(like, e), self.const(like, 1)]
                out.append(self.emit(like, "slice.Tensor", [v, *ops], [with_shape(v.type, sh)]).results[0])
            self.slices[key] = out
        return self.slices[key]

    def recast(self, cast: ir.Operation | None, x: ir.Value) -> ir.Value:
        """x with the dtype the chain's `cast` gives (x itself without one)."""
        if cast is None:
            return x
        return self.emit(cast, CAST.removeprefix(A), [x, *cast.operands[1:]],
                         [with_shape(cast.results[0].type, shape(x))]).results[0]

    def logp(self, hc: ir.Value) -> ir.Value:
        c = self.c
        v = c.vocab
        lg = self.emit(c.mm, "mm", [hc, c.mm.operands[1]], [with_shape(c.mm.results[0].type, [shape(hc)[0], v])])
        lsm = c.lsm.operands
        return self.emit(c.lsm, "_log_softmax", [self.recast(c.cast, lg.results[0]), lsm[1], lsm[2]],
                         [with_shape(c.lsm.results[0].type, [shape(hc)[0], v])]).results[0]

    # ------------------------------------------------------------------ rewrite
    def forward(self) -> None:
        c = self.c
        nll = c.nll
        _, target, weight, reduction, ignore = nll.operands
        out_t, tw_t = (r.type for r in nll.results)
        with ir.InsertionPoint(nll):
            hs = self.slice_of(c.mm, c.mm.operands[0], 0)
            ts = self.slice_of(nll, target, 0)
            total = count = None
            for hc, tc in zip(hs, ts):
                lp = self.logp(hc)
                part = self.emit(nll, "nll_loss_forward", [lp, tc, weight, self.const(nll, 2), ignore], [out_t, tw_t])
                total = self.accumulate(nll, total, part.results[0])
                count = self.accumulate(nll, count, part.results[1])
            if _const(reduction) == 1:   # a mean: the sum of the chunk sums over the sum of the weights
                total = self.emit(nll, "div.Tensor", [total, count], [out_t]).results[0]
        nll.results[0].replace_all_uses_with(total)
        nll.results[1].replace_all_uses_with(count)

    def backward(self) -> None:
        c = self.c
        if c.bwd is None:
            return
        consumers = self.consumers()
        if not consumers:
            return
        first = self.first
        for o in self.moves:
            o.move_before(first)
        g, _, target, weight, reduction, ignore, tw = c.bwd.operands
        dim, dtype = c.lsb.operands[2], c.lsb.operands[3]
        parts: dict[ir.Operation, list[ir.Value]] = {op: [] for op in c.rows}
        sums: dict[ir.Operation, ir.Value | None] = {op: None for op in c.left + [mm for _, mm in c.tleft]}
        with ir.InsertionPoint(first):
            hs = self.slice_of(c.mm, c.mm.operands[0], 0)
            ts = self.slice_of(c.bwd, target, 0)
            for k, (hc, tc) in enumerate(zip(hs, ts)):
                lp = self.logp(hc)      # the chunk's logits again: nothing [T, V] is saved
                rows_t = with_shape(c.bwd.results[0].type, shape(lp))
                dlp = self.emit(c.bwd, "nll_loss_backward", [g, lp, tc, weight, reduction, ignore, tw], [rows_t])
                dx = self.recast(c.g_cast, self.emit(c.lsb, "_log_softmax_backward_data",
                                                     [dlp.results[0], lp, dim, dtype], [rows_t]).results[0])
                for op in c.rows:
                    x = op.operands[1]
                    parts[op].append(self.emit(op, "mm", [dx, x], [with_shape(op.results[0].type,
                                                                              [shape(dx)[0], shape(x)[1]])]).results[0])
                for op in c.left:
                    zc = self.slice_of(op, op.operands[0], 1)[k]
                    sums[op] = self.sum_into(op, sums[op], zc, dx)
                for t, op in c.tleft:
                    dt = self.emit(t, "t", [dx], [with_shape(t.results[0].type, shape(dx)[::-1])]).results[0]
                    yc = self.slice_of(op, op.operands[1], 0)[k]
                    sums[op] = self.sum_into(op, sums[op], dt, yc)
            for op, xs in parts.items():
                op.results[0].replace_all_uses_with(self.cat(op, xs, 0, op.results[0].type))
            sums = {op: self.recast(c.g_cast, s) for op, s in sums.items()}   # one rounding, as eager's
        for op, s in sums.items():
            op.results[0].replace_all_uses_with(s)

    def sum_into(self, like, acc: ir.Value | None, a: ir.Value, b: ir.Value) -> ir.Value:
        """acc + a @ b over the chunks. With a cast chain (bf16 matmuls) the sum is kept in the logits'
        f32, as eager's single matmul accumulates over all tokens, and rounded back once at the end. It
        starts from zeros: each chunk's part then goes into the sum as it is made (a kernel writing
        into the sum in place, sp-plan-memory's sp.in_place), where summing the first two parts would
        hold the first until the second exists."""
        if self.c.g_cast is None:
            return self.matmul_into(like, acc, a, b)
        part = self.emit(like, "mm", [a, b], [like.results[0].type]).results[0]
        widened = self.recast(self.c.cast, part)
        if acc is None and self.c.cast is not None:
            with like.location:
                none = const_none()
            acc = self.emit(like, "new_zeros", [part, self.int_list(like, shape(part)), self.c.cast.operands[1],
                                                none, none, none], [widened.type]).results[0]
        return self.accumulate(like, acc, widened)

    def consumers(self) -> list:
        return self.c.rows + self.c.left + [mm for _, mm in self.c.tleft]

    def plan_hoist(self) -> None:
        """The gradient is consumed at the first consumer: the definitions of the other consumers'
        operands that come after it (and what they read) move before it. NoMatch before any change."""
        self.first, self.moves = None, []
        consumers = self.consumers()
        if self.c.bwd is None or not consumers:
            return
        point = consumers[0]
        for o in consumers[1:]:
            if o.is_before_in_block(point):
                point = o
        reads = [v for op in consumers for v in op.operands if not self._in_chain(v)]
        self.moves = hoist_plan(point, reads, set(self.c.ops()) | {point},
                                "a gradient consumer reads a value computed from the chain")
        self.first = point

    def _in_chain(self, v: ir.Value) -> bool:
        c = self.c
        chain_values = {c.lsb.results[0], *(o.results[0] for o in c.g_views), *(t.results[0] for t, _ in c.tleft)}
        return v in chain_values

    def run(self) -> None:
        self.plan_hoist()   # the only step that can still refuse the chain: before any change
        self.forward()
        self.backward()
        erase_all(self.c.ops())
        self.check()


@dataclass
class TileSequence(Pass):
    """run the LM head + loss and the wide token-local regions (MLPs) in chunks of tokens (fwd and bwd)"""
    name: ClassVar[str] = "sp-tile-sequence"
    chunks: int | None = option(None, "token chunks per tiled region; unset: chosen from the shapes", minimum=1)
    floor: Bytes = option(DEFAULT_FLOOR, "chunks chosen from the shapes: none whose tile is below this size "
                                         "(0: no floor)", minimum=0)

    def run(self, module_op) -> None:
        if any("sp.remat" in f.attributes for f in funcs_of(module_op)):
            raise PassError("the step is already split into @forward/@backward: sp-tile-sequence runs on the "
                            "joint step, before sp-plan-remat", module_op.location)
        func = func_of(module_op)
        for nll in [o.operation for o in body_ops(func) if op_name(o) == A + "nll_loss_forward"]:
            try:
                chain = match(nll)
            except NoMatch:
                continue
            n = default_chunks(chain, self.floor) if self.chunks is None else self.chunks
            if n > chain.tokens:
                raise PassError(f"chunks={n} exceeds the {chain.tokens} token rows of the loss "
                                f"([{chain.tokens}, {chain.vocab}] log-probabilities)", nll.location)
            if n == 1:
                continue
            what = (chain.mm.location, n, chain.tokens, chain.vocab)   # the chain is erased once tiled
            try:
                Tiler(chain, n).run()
            except NoMatch:
                continue
            record(module_op, "lm_head", *what)
        tile_wide_regions(module_op, func, self.chunks, self.floor)
