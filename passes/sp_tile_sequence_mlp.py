"""sp-tile-sequence, second tiler: token-local regions whose intermediates are much wider than the
hidden size (the MLP) run in chunks along the sequence, forward and backward (sp_tile_sequence.py
holds the LM head's tiler; tiling.py the blocks both share).

Tokens: S = seq_len / sp local positions per sequence (`sp.seq_len`, `sp.mesh`), T of them in the
step (the token inputs). A value with layout seq<d,i> is token-full when dim d = outer x S x i; its
width is its elements per token, numel / T.

Regions, by dataflow (backward op locations are not reliable):
  seeds   expanding projections: mm / addmm(bias) of a token-full [rows, D] by a replicated matrix
          to a wider result (gate / up in the forward, mm(dY, W_down^T) in the backward)
  growth  every reader of a wide region value (token-full, width > D) joins; its results are wide
          (growth goes on), narrow token-full (a closing op: down projection, d input) or partial
          (a contraction over the tokens: weight gradient mm(t(G), X), bias gradient sum)
A connected component is one region: an MLP's forward and backward ops (the backward reads the
forward's wide values), one region per layer. A region with an op that is not token-local (not
elementwise, mm / addmm, a view, a 2-D transpose, a sum, a split, slice or cat along a feature dim
(with its tensor list): a fused gate/up projection), which includes the LM head's log-softmax
and loss, a result of another layout, or an operand it cannot cut, is left as it is.

Rewrite, N chunks of the S positions (`bounds`): the region's forward ops (those the loss depends
on) and its backward ops are each cloned N times at the phase's first op; the definitions they read
that come later move up before it (refused before any change if one depends on the region). Chunk c
of an op has its results' token dims scaled to the chunk (views get new size lists) and reads
  region values           chunk c of them (the backward's chunk c reads the forward's chunk c, which
                          sp-plan-remat then saves, or recomputes chunk by chunk)
  other token-full values their chunk: slice.Tensor along the S factor of the token dim (viewed
                          apart as [outer, S, i] first when outer or i is not 1; the view back
                          copies: a slice of several sequences is not contiguous)
  replicated values       the same value (weights, their transposes, constants)
Results read outside the region are joined: token-full ones concatenated along the S factor,
partial ones summed as they are made (addmm(acc, a, b) for a matmul, add.Tensor for a sum), so only
one chunk's wide intermediates are live at a time. Chunk count: ceil(2 F / D) (F the widest width
in the region, D its seeds' input width), lowered so that no chunk of the widest value is below the
pass's floor (bytes), clamped to [1, S]; chunks=N forces N. A stacked gate / up
projection (sp-merge-projections: one matmul cut into pieces, its gradient a cat of theirs) counts
as wide as one piece, so stacking does not change the chunks.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

from torch_mlir import ir

from autosp.dialects.sp import vtensor_shape
from .layouts import PARTIAL, REP, Layout
from .attributes import func_attr
from .base import PassError
from .sp_plan_memory import nbytes
from .ops import A, ELEMENTWISE, LIST, RESHAPE, UNPACK
from .tiling import Builder, NoMatch, auto_chunks, bounds, erase_all, hoist_plan, owner, record, uses
from .torch_ir import body_ops, const_value, is_tensor, is_tensor_list, op_name, shape, strings, with_shape

_RESIZE = RESHAPE | {A + "expand"}           # ops whose size operand (operand 1) follows the result
_TRANSPOSE = {A + "t", A + "transpose.int"}
# ops along a dim (operand index): not the token dim
_FEATURE_DIM = {A + "split.Tensor": 2, A + "slice.Tensor": 1, A + "cat": 1}
_LISTS = {LIST, UNPACK}               # the tensor lists of a split or a cat
_TOKEN_LOCAL = (ELEMENTWISE | _RESIZE | _TRANSPOSE | set(_FEATURE_DIM) | _LISTS
                | {A + "mm", A + "addmm", A + "sum.dim_IntList"})
_SUMMED = {A + "mm", A + "sum.dim_IntList"}  # ops whose partial result is the sum of their chunks'


# ---------------------------------------------------------------------- tokens and regions
@dataclass
class Tokens:
    """The step's local tokens: `per_seq` positions of each sequence (S), `total` in all (T)."""
    per_seq: int
    total: int
    args: list[Layout | None]

    @staticmethod
    def of(module_op, func) -> "Tokens":
        seq_len = ir.IntegerAttr(func_attr(func, "sp.seq_len")).value
        # without sp-partition-sequence before, the step is a one-rank program
        p = ir.IntegerAttr(ir.DictAttr(module_op.attributes["sp.mesh"])["sp"]).value \
            if "sp.mesh" in module_op.attributes else 1
        roles = strings(func_attr(func, "sp.args"))
        block_args = list(func.regions[0].blocks[0].arguments)
        inputs = [a for r, a in zip(roles, block_args) if r.startswith("input:")]
        if not inputs:
            raise PassError("the step has no token inputs (sp.args names none 'input:')", func.location)
        lays = strings(func.attributes["sp.arg_layouts"]) if "sp.arg_layouts" in func.attributes else []
        return Tokens(seq_len // p, math.prod(shape(inputs[0])) // p,
                      [Layout.parse(s) for s in lays] or [None] * len(block_args))

    def layout(self, v: ir.Value) -> Layout | None:
        o = owner(v)
        if o is None:
            return self.args[ir.BlockArgument(v).arg_number]
        if "sp.layout" not in o.attributes:
            return None
        lays = strings(o.attributes["sp.layout"])
        i = ir.OpResult(v).result_number
        return Layout.parse(lays[i]) if i < len(lays) else None

    def full(self, v: ir.Value) -> Layout | None:
        """v's layout when v holds whole sequences of local tokens along its seq dim, else None."""
        if not is_tensor(v):
            return None
        lay = self.layout(v)
        if lay is None or lay.kind != "seq" or shape(v)[lay.dim] % (self.per_seq * lay.inner):
            return None
        return lay

    def width(self, v: ir.Value) -> int:
        """Elements per token."""
        return math.prod(shape(v)) // self.total


def _seed_width(op, tok: Tokens) -> int | None:
    """The input width D of an expanding projection: mm / addmm of token rows [.., D] by a replicated
    matrix to a result wider per token; else None."""
    name = op_name(op)
    if name == A + "mm":
        a, b = op.operands[0], op.operands[1]
    elif name == A + "addmm":
        a, b = op.operands[1], op.operands[2]
    else:
        return None
    la = tok.full(a)
    if la is None or la.dim != 0 or tok.full(op.results[0]) is None or tok.layout(b) != REP:
        return None
    d = tok.width(a)
    return d if tok.width(op.results[0]) > d else None


@dataclass
class Region:
    """One connected token-local region: its forward ops (the loss depends on them) and backward ops."""
    phases: list[list[ir.Operation]]
    narrow: int          # D: the hidden width, the seeds' input width
    wide: int            # F: the widest per-token width of its values
    wide_bytes: int      # the size of that widest value, whole
    seed: ir.Operation   # the first projection (for diagnostics)
    ops: list[ir.Operation] = field(default_factory=list)


def _loss_ancestors(func) -> set:
    ret = body_ops(func)[-1].operation
    seen: set = set()
    stack = [owner(ret.operands[0])] if len(ret.operands) else []
    while stack:
        o = stack.pop()
        if o is None or o in seen:
            continue
        seen.add(o)
        stack.extend(owner(x) for x in o.operands)
    return seen


def find_regions(func, tok: Tokens) -> list[Region]:
    body = [o.operation for o in body_ops(func)]
    widths = {o: d for o in body if (d := _seed_width(o, tok)) is not None}
    if not widths:
        return []
    # the hidden width: the widest input of an expanding projection. A projection from narrower
    # values (the backward of a GQA K/V projection) only returns to the hidden width: not a seed.
    hidden = max(widths.values())
    seeds = [o for o in widths if tok.width(o.results[0]) > hidden]
    members, edges, stack = set(seeds), {}, list(seeds)
    while stack:
        o = stack.pop()
        for r in o.results:
            if not is_tensor_list(r) and (tok.full(r) is None or tok.width(r) <= hidden):
                continue
            for user, _ in uses(r):
                edges.setdefault(o, []).append(user)
                edges.setdefault(user, []).append(o)
                if user not in members:
                    members.add(user)
                    stack.append(user)
    forward = _loss_ancestors(func)
    regions, seen = [], set()
    for o in seeds:
        if o in seen:
            continue
        comp, todo = [], [o]
        seen.add(o)
        while todo:
            x = todo.pop()
            comp.append(x)
            for y in edges.get(x, ()):
                if y not in seen:
                    seen.add(y)
                    todo.append(y)
        # a stacked projection's output or gradient (sp-merge-projections) is as wide as its pieces
        wide, wide_bytes = max((tok.width(r), nbytes(r)) for x in comp for r in x.results
                               if tok.full(r) is not None and not _stacked(x, r))
        phases = [[x for x in comp if x in forward], [x for x in comp if x not in forward]]
        regions.append(Region([p for p in phases if p], hidden, wide, wide_bytes, o, comp))
    return regions


def _stacked(op, r: ir.Value) -> bool:
    """r joins pieces along a feature dim (a cat, or a view or transpose of one), or is read only by
    slices (cut into pieces)."""
    while op_name(op) in _RESIZE | _TRANSPOSE and owner(op.operands[0]) is not None:
        op = owner(op.operands[0])
    readers = [u for u, _ in uses(r)]
    return op_name(op) == A + "cat" or bool(readers) and all(op_name(u) == A + "slice.Tensor" for u in readers)


def default_chunks(region: Region, tok: Tokens, floor: int) -> int:
    """The smallest N with a [S/N, F] chunk at most twice a [S, D] activation, no chunk of its widest
    value below `floor` bytes, in [1, S]."""
    return auto_chunks(math.ceil(2 * region.wide / region.narrow), region.wide_bytes, floor, tok.per_seq)


def _in_block_order(ops: list) -> list:
    return sorted(ops, key=functools.cmp_to_key(lambda a, b: -1 if a.is_before_in_block(b) else 1))


def _split(sh: list[int], d: int, outer: int, s: int, inner: int) -> tuple[list[int], int]:
    """sh with dim d = outer x s x inner taken apart (factors of 1 left out), and where s lands."""
    lead = [outer] if outer > 1 else []
    return sh[:d] + lead + [s] + ([inner] if inner > 1 else []) + sh[d + 1:], d + len(lead)


# ---------------------------------------------------------------------- rewrite
class RegionTiler(Builder):
    def __init__(self, region: Region, tok: Tokens, n: int):
        super().__init__()
        self.region, self.tok, self.n = region, tok, n
        self.members = set(region.ops)
        self.values = {r for o in region.ops for r in o.results}
        self.chunk: dict[tuple[ir.Value, int], ir.Value] = {}      # region value, chunk -> its value
        self.slices: dict[tuple[ir.Value, int], ir.Value] = {}     # outside value, chunk -> its slice
        self.apart: dict[ir.Value, ir.Value] = {}                  # outside value -> viewed [outer, S, i]
        self.sums: dict[ir.Operation, ir.Value] = {}               # partial op -> the sum so far
        self.joined: dict[ir.Value, ir.Value] = {}                 # region value read outside -> whole

    # ------------------------------------------------------------------ plan (no change yet)
    def plan(self) -> None:
        """NoMatch unless every op is token-local and every operand can be cut; where each phase goes."""
        for op in self.region.ops:
            self.check_op(op)
        self.phases = [_in_block_order(p) for p in self.region.phases]
        if len(self.phases) == 2 and not self.phases[0][0].is_before_in_block(self.phases[1][0]):
            raise NoMatch("the region's backward starts before its forward")
        self.moves = [self.plan_hoist(p) for p in self.phases]

    def check_op(self, op) -> None:
        name, tok = op_name(op), self.tok
        if name not in _TOKEN_LOCAL:
            raise NoMatch(f"{name} is not token-local")
        if name in _TRANSPOSE and len(shape(op.operands[0])) != 2:
            raise NoMatch("a transpose of more than two dims")
        for r in op.results:
            lay = tok.layout(r) if is_tensor(r) else None
            if is_tensor_list(r):
                if any(u not in self.members for u, _ in uses(r)):
                    raise NoMatch("a tensor list read outside the region")
            elif not (lay == PARTIAL and name in _SUMMED or tok.full(r) is not None):
                raise NoMatch(f"{name} makes a {lay} value")
        res = op.results[0]
        if name in _FEATURE_DIM:
            self.check_feature_dim(op)
        for i, x in enumerate(op.operands):
            lay = tok.layout(x) if is_tensor(x) else None
            if x in self.values:
                if lay == PARTIAL:
                    raise NoMatch("a region op reads a partial sum made in the region")
            elif is_tensor_list(x):
                raise NoMatch(f"{name} reads a tensor list made outside the region")
            elif not is_tensor(x) or tok.full(x) is not None:
                continue
            elif lay != REP:
                raise NoMatch(f"{name} reads a {lay} value")
            elif name in ELEMENTWISE:   # a replicated operand must broadcast along the tokens
                d = tok.layout(res).dim - (len(shape(res)) - len(shape(x)))
                if d >= 0 and shape(x)[d] != 1:
                    raise NoMatch(f"{name} reads a replicated operand along the token dim")
            elif name == A + "addmm" and i == 0 and len(shape(x)) == 2 and shape(x)[0] != 1:
                raise NoMatch("an addmm bias with token rows")

    def check_feature_dim(self, op) -> None:
        """A split, slice or cat cuts or joins along a feature dim, never the token dim."""
        tensor = op.results[0] if op_name(op) == A + "cat" else op.operands[0]
        known, dim = const_value(op.operands[_FEATURE_DIM[op_name(op)]])
        lay = self.tok.full(tensor)
        if lay is None or not known:
            raise NoMatch(f"{op_name(op)} of a value that is not token-full, or along an unknown dim")
        if dim % len(shape(tensor)) == lay.dim:
            raise NoMatch(f"{op_name(op)} along the token dim")

    def plan_hoist(self, phase: list) -> list:
        """The definitions the phase reads that come after its first op (and what they read), in order."""
        reads = [x for op in phase for x in op.operands if x not in self.values]
        return hoist_plan(phase[0], reads, self.members, "a value the region reads is computed from the region")

    # ------------------------------------------------------------------ rewrite
    def run(self) -> None:
        self.ranges = bounds(self.tok.per_seq, self.n)
        for phase, moves in zip(self.phases, self.moves):
            point = phase[0]
            self.shared_constants()             # made at this phase's point: not shared with the other
            self.slices, self.apart = {}, {}
            for o in moves:
                if not o.is_before_in_block(point):   # the forward may have moved it up already
                    o.move_before(point)
            with ir.InsertionPoint(point):
                for c in range(self.n):
                    for op in phase:
                        self.clone(op, c)
                self.join(phase)
        for r, whole in self.joined.items():
            for user, i in uses(r):
                if user not in self.members:
                    user.operands[i] = whole
        erase_all(self.region.ops)
        self.check()

    def chunk_type(self, r: ir.Value, rows: int) -> ir.Type:
        lay = self.tok.layout(r)
        if not is_tensor(r) or lay.kind != "seq":
            return r.type                     # a list (its tensors' types are the chunks'), or a partial term
        sh = shape(r)
        sh[lay.dim] = sh[lay.dim] // self.tok.per_seq * rows
        return with_shape(r.type, sh)

    def clone(self, op, c: int) -> None:
        s, e = self.ranges[c]
        name = op_name(op)
        ins = [self.operand(op, x, c) for x in op.operands]
        types = [self.chunk_type(r, e - s) for r in op.results]
        if name == A + "mm" and self.tok.layout(op.results[0]) == PARTIAL:
            self.sums[op] = self.matmul_into(op, self.sums.get(op), ins[0], ins[1])
            return
        if name in _RESIZE:
            ins[1] = self.int_list(op, vtensor_shape(types[0]))
        new = op.clone()                      # at the insertion point, with op's attributes and location
        for i, x in enumerate(ins):
            new.operands[i] = x
        for r, t in zip(new.results, types):
            r.set_type(t)
        self.created.append(new)
        if self.tok.layout(op.results[0]) == PARTIAL:    # a sum over the tokens
            self.sums[op] = self.accumulate(op, self.sums.get(op), new.results[0])
            return
        for r, nr in zip(op.results, new.results):
            self.chunk[(r, c)] = nr

    def operand(self, op, x: ir.Value, c: int) -> ir.Value:
        if x in self.values:
            return self.chunk[(x, c)]
        lay = self.tok.full(x)
        if lay is None:
            return x                          # replicated: weights, constants, shared by every chunk
        if (x, c) not in self.slices:
            self.slices[(x, c)] = self.slice(op, x, lay, c)
        return self.slices[(x, c)]

    def slice(self, like, x: ir.Value, lay: Layout, c: int) -> ir.Value:
        """Chunk c of the S positions of a token-full x."""
        s, e = self.ranges[c]
        sh, d, per_seq = shape(x), lay.dim, self.tok.per_seq
        outer = sh[d] // (per_seq * lay.inner)
        if outer == 1 and lay.inner == 1:
            at, v, apart = d, x, lay
        else:
            split, at = _split(sh, d, outer, per_seq, lay.inner)
            apart = Layout("seq", at)
            if x not in self.apart:
                self.apart[x] = self.view(like, x, split, apart)
            v = self.apart[x]
        part = shape(v)
        part[at] = e - s
        ops = [self.const(like, at), self.const(like, s), self.const(like, e), self.const(like, 1)]
        out = self.emit(like, "slice.Tensor", [v, *ops], [with_shape(x.type, part)], apart).results[0]
        if v is x:
            return out
        sh[d] = outer * (e - s) * lay.inner
        return self.view(like, out, sh, lay)

    def join(self, phase: list) -> None:
        """The phase's results read outside the region, whole: partial sums as made, the rest concatenated."""
        for op in phase:
            for r in op.results:
                if all(u in self.members for u, _ in uses(r)):
                    continue
                if op in self.sums:
                    self.joined[r] = self.sums[op]
                    continue
                lay, parts = self.tok.full(r), [self.chunk[(r, c)] for c in range(self.n)]
                sh, d = shape(r), lay.dim
                outer = sh[d] // (self.tok.per_seq * lay.inner)
                if outer == 1 and lay.inner == 1:
                    self.joined[r] = self.cat(op, parts, d, r.type, lay)
                    continue
                split, at = _split(sh, d, outer, self.tok.per_seq, lay.inner)
                apart = Layout("seq", at)
                pieces = []
                for p, (s, e) in zip(parts, self.ranges):
                    piece = list(split)
                    piece[at] = e - s
                    pieces.append(self.view(op, p, piece, apart))
                whole = self.cat(op, pieces, at, with_shape(r.type, split), apart)
                self.joined[r] = self.view(op, whole, sh, lay)


def tile_wide_regions(module_op, func, chunks: int | None, floor: int) -> None:
    """Tile every wide token-local region of the step in `chunks` (or the default rule's, with its
    `floor`) chunks."""
    if not any("sp.layout" in o.operation.attributes for o in body_ops(func)):
        return                                # no layouts: nothing is known to be token-local
    tok = Tokens.of(module_op, func)
    for region in find_regions(func, tok):
        n = default_chunks(region, tok, floor) if chunks is None else chunks
        tiler = RegionTiler(region, tok, n)
        try:
            tiler.plan()
        except NoMatch:
            continue
        if n > tok.per_seq:
            raise PassError(f"chunks={n} exceeds the {tok.per_seq} local positions per sequence that a token-local "
                            f"region is cut along ([{tok.total}, {region.wide}] intermediates of [{tok.total}, "
                            f"{region.narrow}] inputs)", region.seed.location)
        if n > 1:
            loc = region.seed.location        # the seed is erased with the region
            tiler.run()
            record(module_op, "mlp", loc, n, tok.total, region.wide)
