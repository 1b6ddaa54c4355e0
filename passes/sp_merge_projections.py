"""sp-merge-projections: projections of one input by several weights (attention's q / k / v, the MLP's
gate / up) become one matmul by the weights stacked along their output dim, forward and backward:

  forward   y_i = mm(x, t(W_i))                   ->  Y = mm(x, t(cat(W_i, 0)));  y_i = Y[:, o_i:o_i+n_i]
  backward  dx  = sum_i mm(g_i, t(t(W_i)))        ->  G = cat(g_i, 1);  dx = mm(G, cat(W_i, 0))
            dW_i = mm(t(g_i), x)                  ->  dW = mm(t(G), x);  dW_i = dW[o_i:o_i+n_i]

so a Llama layer's seven projections take four matmuls forward and backward instead of seven, each
over a larger matrix, and the weight gradients of a group reach their all-reduce as one tensor.
cat(W_i, 0) of parameters costs nothing at run time: the runtime keeps each group's parameters
side by side in one storage (the source model's names and tensors stay separate, views of it), so
the cat is a view of them (runtime/module.py packs, runtime/executor.py sees it), and sp-plan-memory
counts it as the parameters' own bytes.

A weight joins when it is a parameter read only by its projection: W -> [casts] -> t -> the forward
mm, and in the backward t(t(W)) -> mm(g, .) for the input gradient, mm(t(g), x) for its own. A group
is two or more such projections of the same input (through reshapes and autocast's casts of it, one
per projection) with the same element type and casts. Its backward merges when each member's input
gradient is summed with the others' alone (add.Tensor, through reshapes and casts: autocast sums the
bf16 products in fp32): the sum becomes the one matmul (cast as the terms were). Its forward merges only when every
output is read, through views, by elementwise ops alone (gate / up into SwiGLU): a slice saved for the
backward keeps its whole matmul result alive, so a group with an output read by anything else (v by
attention) keeps its forward matmuls, as its sliced outputs could otherwise hold the others' columns.
The sums are those of one larger matmul: eager's up to fp32 rounding order.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from .attributes import func_attr
from .base import Pass
from .ops import A, CAST, ELEMENTWISE, RESHAPE, VIEWS
from .tiling import Builder, owner
from .torch_ir import const_value, dtype_str, funcs_of, op_name, shape, strings, with_shape

CASTS = {CAST, "torch.prims.convert_element_type"}
ADD = A + "add.Tensor"
MM = A + "mm"
T = A + "t"


@dataclass
class Projection:
    w: ir.Value               # the parameter [n, D]
    casts: list               # W -> cast -> ... (each its only reader)
    fwd: ir.Operation         # mm(x, t(casts(W)))
    dx: ir.Operation | None   # mm(g, t(t(casts(W))))
    dw: ir.Operation | None   # mm(t(g), x')

    @property
    def rows(self) -> int:
        return shape(self.w)[0]

    @property
    def g(self) -> ir.Value | None:
        return self.dx.operands[0] if self.dx is not None else None


def _only_reader(v: ir.Value):
    readers = list(v.uses)
    return readers[0].owner.operation if len(readers) == 1 else None


def _root(v: ir.Value) -> ir.Value:
    """v through reshapes and casts: one key for `view(h, [T, D])` (autocast: `view(cast(h))`), made
    once per projection."""
    while (o := owner(v)) is not None and op_name(o) in RESHAPE | CASTS:
        v = o.operands[0]
    return v


def _same(a: ir.Value, b: ir.Value) -> bool:
    return _root(a) == _root(b) and shape(a) == shape(b) and dtype_str(a.type) == dtype_str(b.type)


def _projection(w: ir.Value) -> Projection | None:
    casts, v = [], w
    while (r := _only_reader(v)) is not None and op_name(r) in CASTS and r.operands[0] == v:
        casts.append(r)
        v = r.results[0]
    t = _only_reader(v)
    if t is None or op_name(t) != T:
        return None
    fwd = dx = None
    for u in t.results[0].uses:
        o = u.owner.operation
        if op_name(o) == MM and u.operand_number == 1 and fwd is None:
            fwd = o
        elif op_name(o) == T and (m := _only_reader(o.results[0])) is not None and op_name(m) == MM \
                and m.operands[1] == o.results[0] and dx is None:
            dx = m
        else:
            return None
    if fwd is None:
        return None
    dw = None
    if dx is not None:   # the weight gradient: mm(t(g), x) with x the forward's input
        for u in dx.operands[0].uses:
            o = u.owner.operation
            if op_name(o) == T and (m := _only_reader(o.results[0])) is not None and op_name(m) == MM \
                    and m.operands[0] == o.results[0] and _same(m.operands[1], fwd.operands[0]):
                dw = m
    return Projection(w, casts, fwd, dx, dw)


def _signature(p: Projection) -> tuple:
    return (dtype_str(p.w.type), shape(p.w)[1],
            tuple((op_name(c), dtype_str(c.results[0].type)) for c in p.casts))


def _elementwise_readers(v: ir.Value) -> bool:
    """v is read, through views, by elementwise ops alone."""
    for u in v.uses:
        o = u.owner.operation
        name = op_name(o)
        if name in VIEWS:
            if not all(_elementwise_readers(r) for r in o.results):
                return False
        elif name not in ELEMENTWISE:
            return False
    return True


def _summand(v: ir.Value):
    """The add.Tensor (alpha 1) that v, through reshapes and casts read only once, is a term of."""
    while (r := _only_reader(v)) is not None and op_name(r) in RESHAPE | CASTS:
        v = r.results[0]
    r = _only_reader(v)
    if r is None or op_name(r) != ADD or const_value(r.operands[2]) != (True, 1):
        return None
    return r


def _summand_cast(v: ir.Value) -> ir.Value:
    """The cast among v's reshapes and casts up to its add (the dtype the terms are summed in)."""
    cast = None
    while (r := _only_reader(v)) is not None and op_name(r) in RESHAPE | CASTS:
        v = r.results[0]
        cast = v if op_name(r) in CASTS else cast
    return cast


def _terms(add) -> list[ir.Value]:
    """The values an add tree sums, through reshapes and casts (autocast's rounded products summed
    in fp32): an add read only by the tree is opened."""
    out = []
    for x in add.operands[:2]:
        v = _root(x)
        o = owner(v)
        if o is not None and op_name(o) == ADD and _summand(v) is not None:
            out.extend(_terms(o))
        else:
            out.append(v)
    return out


def _sum_of(group: list[Projection]):
    """The add whose terms are exactly the group's input gradients, or None."""
    want = [p.dx.results[0] for p in group]
    if len({str(c.type) if (c := _summand_cast(w)) is not None else None for w in want}) > 1:
        return None   # summed in different dtypes
    add = _summand(want[0])
    while add is not None:
        terms = _terms(add)
        if not all(any(t == w for w in want) for t in terms):
            return None   # another value is summed in
        if len(terms) == len(want):
            return add    # each term one of the group's, as many as they are
        add = _summand(add.results[0])
    return None


@dataclass
class MergeProjections(Pass):
    """one matmul for the projections of one input (q / k / v, gate / up), forward and backward"""
    name: ClassVar[str] = "sp-merge-projections"

    def run(self, module_op) -> None:
        for func in funcs_of(module_op):
            roles = strings(func_attr(func, "sp.args"))
            params = [a for r, a in zip(roles, func.regions[0].blocks[0].arguments)
                      if r.startswith("param:") and len(shape(a)) == 2]
            groups: dict[tuple, list[Projection]] = {}
            for w in params:
                p = _projection(w)
                if p is not None:
                    groups.setdefault((_root(p.fwd.operands[0]), *_signature(p)), []).append(p)
            for group in groups.values():
                if len(group) > 1:
                    self.merge(func, group)

    def merge(self, func, group: list[Projection]) -> None:
        fwd = all(_elementwise_readers(p.fwd.results[0]) for p in group)
        total = _sum_of(group) if all(p.dx is not None and p.dw is not None for p in group) else None
        if not fwd and total is None:
            return
        b, first = Builder(), group[0]
        block = func.regions[0].blocks[0]
        n, d = sum(p.rows for p in group), shape(first.w)[1]
        offsets = [sum(p.rows for p in group[:i]) for i in range(len(group))]
        like = first.fwd
        # the stacked weight, cast as each member is, and its transpose: views of the parameters
        with ir.InsertionPoint.at_block_begin(block):
            w = b.cat(like, [p.w for p in group], 0, with_shape(first.w.type, [n, d]))
            for c in first.casts:
                w = b.emit(like, op_name(c).removeprefix(A), [w, *_constants(c)],
                           [with_shape(c.results[0].type, [n, d])]).results[0]
            wt = b.emit(like, "t", [w], [with_shape(w.type, [d, n])]).results[0]
        dead = []
        if fwd:
            earliest = min((p.fwd for p in group), key=_position(block))
            x = earliest.operands[0]
            with ir.InsertionPoint(earliest):
                b.shared_constants()
                y = b.emit(like, "mm", [x, wt], [with_shape(first.fwd.results[0].type, [shape(x)[0], n])]).results[0]
                for p, o in zip(group, offsets):
                    p.fwd.results[0].replace_all_uses_with(self.slice(b, like, y, 1, o, p.rows))
            dead += [p.fwd for p in group]
        if total is not None:
            last = max((owner(p.g) for p in group), key=_position(block))
            bwd = first.dx
            with ir.InsertionPoint.after(last):
                b.shared_constants()
                tokens = shape(first.g)[0]
                g = b.cat(bwd, [p.g for p in group], 1, with_shape(first.g.type, [tokens, n]))
                dx = b.emit(bwd, "mm", [g, b.emit(bwd, "t", [wt], [w.type]).results[0]],
                            [first.dx.results[0].type]).results[0]
                gt = b.emit(bwd, "t", [g], [with_shape(g.type, [n, tokens])]).results[0]
                dw = b.emit(first.dw, "mm", [gt, first.dw.operands[1]],
                            [with_shape(first.dw.results[0].type, [n, d])]).results[0]
                summed = b.view(bwd, dx, shape(total.results[0]))
                if dtype_str(summed.type) != dtype_str(total.results[0].type):   # autocast: summed in fp32
                    cast = owner(_summand_cast(first.dx.results[0]))
                    summed = b.emit(bwd, op_name(cast).removeprefix(A), [summed, *_constants(cast)],
                                    [total.results[0].type]).results[0]
                slices = [self.slice(b, first.dw, dw, 0, o, p.rows) for p, o in zip(group, offsets)]
            end = owner(slices[-1])
            total.results[0].replace_all_uses_with(summed)
            for p, s in zip(group, slices):
                p.dw.results[0].replace_all_uses_with(s)
            _sink(block, slices, end)
            dead += [total] + [p.dw for p in group]
        b.check()
        _erase_dead(dead)

    @staticmethod
    def slice(b: Builder, like, v: ir.Value, dim: int, start: int, width: int) -> ir.Value:
        sh = shape(v)
        sh[dim] = width
        return b.emit(like, "slice.Tensor", [v, b.const(like, dim), b.const(like, start),
                                             b.const(like, start + width), b.const(like, 1)],
                      [with_shape(v.type, sh)]).results[0]


def _constants(cast) -> list[ir.Value]:
    """A cast's operands after its input (dtype, device, ...: constants), made again here, where the
    cast is made again: the originals may come later."""
    return [owner(x).clone().results[0] for x in cast.operands[1:]]


def _position(block):
    index = {op: i for i, op in enumerate(o.operation for o in block.operations)}
    return lambda op: index[op]


def _sink(block, values: list[ir.Value], end) -> None:
    """Move the readers of `values` (and theirs) that come before `end` to after it, in order: the
    weight gradient of a member whose g came early was transposed and cast there."""
    pos = _position(block)
    limit = pos(end)
    todo, early = list(values), set()
    while todo:
        for u in todo.pop().uses:
            o = u.owner.operation
            if o not in early and pos(o) < limit:
                early.add(o)
                todo.extend(o.results)
    for o in sorted(early, key=pos, reverse=True):
        o.move_after(end)


def _erase_dead(roots: list) -> None:
    """Erase roots, which nothing reads any more, and what only they read (collected first: an erased
    op cannot be compared)."""
    cands, frontier = list(roots), list(roots)
    while frontier:
        for x in map(owner, frontier.pop().operands):
            if x is not None and x not in cands and \
                    all(u.owner.operation in cands for r in x.results for u in r.uses):
                cands.append(x)
                frontier.append(x)
    while cands:
        unused = [o for o in cands if not any(list(r.uses) for r in o.results)]
        for o in unused:
            cands.remove(o)
            o.erase()
