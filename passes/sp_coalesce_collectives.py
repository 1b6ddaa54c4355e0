"""sp-coalesce-collectives: adjacent collectives of one kind become one collective over a flat buffer.

Every collective is a rendezvous of its group: its latency, not its bytes, dominates small messages
(on CPU ranks a gloo round trip; on GPUs an NCCL launch). The backward ends with one all-reduce per
parameter gradient, and Ulysses attention re-shards q, k and v one after another. This pass packs
them as DDP's gradient buckets do:

- `sp.all_reduce`s with the same op and group: each operand flattened, concatenated, reduced once,
  split and viewed back;
- `sp.all_to_all`s with the same dims and group whose operands differ only along the scatter dim
  (q, k and v, GQA included): each operand viewed as [..., n, c_i / n, ...] at the scatter dim,
  concatenated there, re-sharded once, split back. Chunk j of the packed tensor is every operand's
  chunk j, so each result is exactly the collective of its own operand.

A run is a maximal sequence of collectives with nothing else between them (constants aside). Inside
a run, a collective that reads another's result waits for it (a later round); a bucket holds at most
`bucket` bytes, so the packed copy stays a small transient that sp-plan-memory (run after this pass)
counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from autosp.dialects.sp import AllReduceOp, AllToAllOp
from .base import Bytes, Pass, option
from .ops import CONSTANT, LIST, UNPACK
from .sp_plan_memory import nbytes
from .torch_ir import aten, body_ops, const_int, dtype_str, funcs_of, int_list_value, op_name, shape, with_shape

COALESCED = ("sp.all_reduce", "sp.all_to_all")
TENSORS = "!torch.list<vtensor>"


def _attrs(op) -> tuple:
    attrs = op.operation.attributes
    return tuple(sorted((name, str(attrs[name])) for name in attrs))


def _int_attr(op, name: str) -> int:
    return ir.IntegerAttr(op.operation.attributes[name]).value


def _key(op) -> tuple:
    """Collectives with equal keys can share one buffer."""
    x = op.operation.operands[0]
    key = (op_name(op), _attrs(op), dtype_str(x.type))
    if op_name(op) == "sp.all_to_all":
        s = list(shape(x))
        s[_int_attr(op, "scatter_dim")] = s[_int_attr(op, "gather_dim")] = -1   # the dims operands may differ in
        key += (tuple(s),)
    return key


def _packable(ops: list) -> list[list]:
    """all-to-alls pack when their operands differ along one dim (the scatter or the gather dim):
    split a group into such sets, by gather-dim size when both differ."""
    if op_name(ops[0]) != "sp.all_to_all":
        return [ops]
    s, g = _int_attr(ops[0], "scatter_dim"), _int_attr(ops[0], "gather_dim")
    if any(len({shape(o.operation.operands[0])[d] for o in ops}) == 1 for d in (s, g)):
        return [ops]
    by_g: dict[int, list] = {}
    for o in ops:
        by_g.setdefault(shape(o.operation.operands[0])[g], []).append(o)
    return list(by_g.values())


def _list(values: list[ir.Value]) -> ir.Value:
    return ir.Operation.create(LIST, results=[ir.Type.parse(TENSORS)], operands=values).results[0]


def _view(x: ir.Value, sizes: list[int]) -> ir.Value:
    if shape(x) == sizes:
        return x
    return aten("view", [x, int_list_value(sizes)], [with_shape(x.type, sizes)]).results[0]


def _split(x: ir.Value, sizes: list[int], dim: int, shapes: list[list[int]]) -> list[ir.Value]:
    parts = aten("split_with_sizes", [x, int_list_value(sizes), const_int(dim)], [ir.Type.parse(TENSORS)]).results[0]
    return list(ir.Operation.create(UNPACK, results=[with_shape(x.type, s) for s in shapes], operands=[parts]).results)


def _cat(xs: list[ir.Value], dim: int, out_shape: list[int]) -> ir.Value:
    return aten("cat", [_list(xs), const_int(dim)], [with_shape(xs[0].type, out_shape)]).results[0]


def _all_reduce(ops: list) -> list[ir.Value]:
    first = ops[0].operation
    xs = [o.operation.operands[0] for o in ops]
    sizes = [math.prod(shape(x)) for x in xs]
    flat = _cat([_view(x, [n]) for x, n in zip(xs, sizes)], 0, [sum(sizes)])
    reduced = AllReduceOp(flat, first.attributes["op"], first.attributes["group"], out=flat.type).out
    return [_view(p, shape(x)) for p, x in zip(_split(reduced, sizes, 0, [[n] for n in sizes]), xs)]


def _all_to_all(ops: list) -> list[ir.Value]:
    first = ops[0].operation
    s, g = _int_attr(ops[0], "scatter_dim"), _int_attr(ops[0], "gather_dim")
    xs = [o.operation.operands[0] for o in ops]
    outs = [shape(o.operation.results[0]) for o in ops]
    n = shape(xs[0])[s] // outs[0][s]   # the group's size
    if len({shape(x)[g] for x in xs}) > 1:
        # along the gather dim (their scatter dims agree): the result holds, per peer, every operand's piece: [n, sum c_i]
        sizes = [shape(x)[g] for x in xs]
        packed = _cat(xs, g, [*shape(xs[0])[:g], sum(sizes), *shape(xs[0])[g + 1:]])
        moved = _move(first, packed, s, g, n)
        per_peer = _view(moved, _widen(shape(moved), g, n, sum(sizes)))
        return [aten("reshape", [p, int_list_value(o)], [with_shape(p.type, o)]).results[0]
                for p, o in zip(_split(per_peer, sizes, g + 1, [_widen(o, g, n, c) for o, c in zip(outs, sizes)]), outs)]
    # along the scatter dim: chunk j of the packed operand is every operand's chunk j
    chunks = [shape(x)[s] // n for x in xs]
    packed = _cat([_view(x, _widen(shape(x), s, n, c)) for x, c in zip(xs, chunks)], s + 1,
                  _widen(shape(xs[0]), s, n, sum(chunks)))
    moved = _move(first, _view(packed, _resize(shape(xs[0]), s, n * sum(chunks))), s, g, n)
    return _split(moved, chunks, s, outs)


def _widen(sh: list[int], d: int, n: int, c: int) -> list[int]:
    """sh with dim d written as [n, c]."""
    return [*sh[:d], n, c, *sh[d + 1:]]


def _resize(sh: list[int], d: int, size: int) -> list[int]:
    return [*sh[:d], size, *sh[d + 1:]]


def _move(like, x: ir.Value, s: int, g: int, n: int) -> ir.Value:
    """The all-to-all `like` (its dims and group) of x."""
    out = _resize(_resize(shape(x), s, shape(x)[s] // n), g, shape(x)[g] * n)
    return AllToAllOp(x, like.attributes["scatter_dim"], like.attributes["gather_dim"], like.attributes["group"],
                      out=with_shape(x.type, out)).out


@dataclass
class CoalesceCollectives(Pass):
    """pack adjacent all-reduces / all-to-alls of one kind into one collective (gradient buckets)"""
    name: ClassVar[str] = "sp-coalesce-collectives"
    bucket: Bytes = option(25 * 2**20, "the most bytes one packed collective carries (DDP's default bucket)",
                           minimum=1)

    def run(self, module_op) -> None:
        for func in funcs_of(module_op):
            for run, anchor in self._runs(func):
                for group in self._groups(run):
                    if len(group) == 1:
                        group[0].operation.move_before(anchor)
                    else:
                        self._pack(group, anchor)

    @staticmethod
    def _runs(func) -> list[tuple[list, ir.Operation]]:
        """Each run of two or more collectives, with the op that ends it."""
        runs, cur = [], []
        for op in body_ops(func):
            name = op_name(op)
            if name in COALESCED:
                cur.append(op)
            elif not name.startswith(CONSTANT):
                if len(cur) > 1:
                    runs.append((cur, op.operation))
                cur = []
        return runs

    def _groups(self, run: list) -> list[list]:
        """The run's collectives grouped by key and round (a collective reading another's result goes
        a round later), rounds in order, each group cut at `bucket` bytes."""
        made = {r: i for i, op in enumerate(run) for r in op.operation.results}
        rounds: list[int] = []
        for op in run:
            rounds.append(max((rounds[made[x]] + 1 for x in op.operation.operands if x in made), default=0))
        groups: dict[tuple, list[list]] = {}
        for op, rnd in zip(run, rounds):
            buckets = groups.setdefault((rnd, _key(op)), [[]])
            if buckets[-1] and sum(nbytes(o.operation.operands[0]) for o in buckets[-1]) \
                    + nbytes(op.operation.operands[0]) > self.bucket:
                buckets.append([])
            buckets[-1].append(op)
        return [p for _, bs in sorted(groups.items(), key=lambda kv: kv[0][0]) for b in bs for p in _packable(b)]

    def _pack(self, ops: list, anchor: ir.Operation) -> None:
        """One collective for `ops`, placed before `anchor` (after the whole run: earlier rounds are
        placed first, and operands from outside the run precede it)."""
        with ir.InsertionPoint(anchor), ops[-1].operation.location:
            new = _all_reduce(ops) if op_name(ops[0]) == "sp.all_reduce" else _all_to_all(ops)
        for op, value in zip(ops, new):
            op.operation.results[0].replace_all_uses_with(value)
        for op in ops:
            op.operation.erase()
