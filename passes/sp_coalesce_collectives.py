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
  chunk j, so each result is exactly the collective of its own operand. Operands that differ along
  the gather dim instead (dq against GQA's dk, dv) are concatenated there, and each result is copied
  out of the peers' pieces.

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
from .ops import CONSTANT, UNPACK
from .sp_plan_memory import nbytes
from .tiling import Builder
from .torch_ir import body_ops, dtype_str, funcs_of, int_attr, op_name, shape, with_shape

COALESCED = ("sp.all_reduce", "sp.all_to_all")
DEFAULT_BUCKET = 25 * 2**20   # DDP's default bucket


def _key(op) -> tuple:
    """Collectives with equal keys can share one buffer."""
    x, attrs = op.operation.operands[0], op.operation.attributes
    key = (op_name(op), tuple(sorted((a, str(attrs[a])) for a in attrs)), dtype_str(x.type))
    if op_name(op) == "sp.all_to_all":
        s = list(shape(x))
        s[int_attr(op, "scatter_dim")] = s[int_attr(op, "gather_dim")] = -1   # the dims operands may differ in
        key += (tuple(s),)
    return key


def _packable(ops: list) -> list[list]:
    """all-to-alls pack when their operands differ along one dim (the scatter or the gather dim):
    split a group into such sets, by gather-dim size when both differ."""
    if op_name(ops[0]) != "sp.all_to_all":
        return [ops]
    s, g = int_attr(ops[0], "scatter_dim"), int_attr(ops[0], "gather_dim")
    if any(len({shape(o.operation.operands[0])[d] for o in ops}) == 1 for d in (s, g)):
        return [ops]
    by_g: dict[int, list] = {}
    for o in ops:
        by_g.setdefault(shape(o.operation.operands[0])[g], []).append(o)
    return list(by_g.values())


def _resize(sh: list[int], d: int, *sizes: int) -> list[int]:
    """sh with dim d replaced by `sizes` (one size, or [n, c] to split it)."""
    return [*sh[:d], *sizes, *sh[d + 1:]]


class Packer(Builder):
    """The packed form of a bucket of collectives, created before the run's end, at the location of
    the bucket's last collective."""

    def view(self, like, v: ir.Value, sh: list[int]) -> ir.Value:
        return v if shape(v) == sh else super().view(like, v, sh)

    def split(self, like, v: ir.Value, sizes: list[int], dim: int, shapes: list[list[int]]) -> list[ir.Value]:
        parts = self.emit(like, "split_with_sizes", [v, self.int_list(like, sizes), self.const(like, dim)],
                          [ir.Type.parse("!torch.list<vtensor>")]).results[0]
        with like.location:
            return list(ir.Operation.create(UNPACK, results=[with_shape(v.type, s) for s in shapes],
                                            operands=[parts]).results)

    def all_reduce(self, like, xs: list[ir.Value]) -> list[ir.Value]:
        sizes = [math.prod(shape(x)) for x in xs]
        flat = self.cat(like, [self.view(like, x, [n]) for x, n in zip(xs, sizes)], 0,
                        with_shape(xs[0].type, [sum(sizes)]))
        with like.location:
            reduced = AllReduceOp(flat, like.attributes["op"], like.attributes["group"], out=flat.type).out
        return [self.view(like, p, shape(x)) for p, x in zip(self.split(like, reduced, sizes, 0, [[n] for n in sizes]), xs)]

    def all_to_all(self, like, xs: list[ir.Value], outs: list[list[int]]) -> list[ir.Value]:
        s, g = int_attr(like, "scatter_dim"), int_attr(like, "gather_dim")
        n = shape(xs[0])[s] // outs[0][s]   # the group's size
        if len({shape(x)[g] for x in xs}) > 1:
            # along the gather dim (the scatter dims agree): the result holds, per peer, every
            # operand's piece, [n, sum c_i]; each result is copied out of its pieces
            sizes = [shape(x)[g] for x in xs]
            moved = self.move(like, self.cat(like, xs, g, with_shape(xs[0].type, _resize(shape(xs[0]), g, sum(sizes)))), n)
            per_peer = self.view(like, moved, _resize(shape(moved), g, n, sum(sizes)))
            parts = self.split(like, per_peer, sizes, g + 1, [_resize(o, g, n, c) for o, c in zip(outs, sizes)])
            return [self.emit(like, "reshape", [p, self.int_list(like, o)], [with_shape(p.type, o)]).results[0]
                    for p, o in zip(parts, outs)]
        # along the scatter dim: chunk j of the packed operand is every operand's chunk j
        chunks = [shape(x)[s] // n for x in xs]
        packed = self.cat(like, [self.view(like, x, _resize(shape(x), s, n, c)) for x, c in zip(xs, chunks)], s + 1,
                          with_shape(xs[0].type, _resize(shape(xs[0]), s, n, sum(chunks))))
        moved = self.move(like, self.view(like, packed, _resize(shape(xs[0]), s, n * sum(chunks))), n)
        return self.split(like, moved, chunks, s, outs)

    @staticmethod
    def move(like, x: ir.Value, n: int) -> ir.Value:
        """The all-to-all `like` (its dims and group) of x, over n ranks."""
        s, g = int_attr(like, "scatter_dim"), int_attr(like, "gather_dim")
        out = _resize(_resize(shape(x), s, shape(x)[s] // n), g, shape(x)[g] * n)
        with like.location:
            return AllToAllOp(x, like.attributes["scatter_dim"], like.attributes["gather_dim"],
                              like.attributes["group"], out=with_shape(x.type, out)).out


@dataclass
class CoalesceCollectives(Pass):
    """pack adjacent all-reduces / all-to-alls of one kind into one collective (gradient buckets)"""
    name: ClassVar[str] = "sp-coalesce-collectives"
    bucket: Bytes = option(DEFAULT_BUCKET, "the most bytes one packed collective carries (DDP's default bucket)",
                           minimum=1)

    def run(self, module_op) -> None:
        for func in funcs_of(module_op):
            self.coalesce(func)

    def coalesce(self, func) -> None:
        """One function's runs (sp-plan-remat{policy=auto} coalesces each candidate before it
        predicts its peak, so the peak it plans for is the one sp-plan-memory finds)."""
        packer = Packer()   # its constants, made at an earlier run's end, precede the later runs
        for run, anchor in self._runs(func):
            for group in self._groups(run):
                if len(group) == 1:
                    group[0].operation.move_before(anchor)
                else:
                    self._pack(packer, group, anchor)
        packer.check()

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
        filled: dict[tuple, int] = {}   # bytes in each group's last bucket
        for op, rnd in zip(run, rounds):
            key, size = (rnd, _key(op)), nbytes(op.operation.operands[0])
            buckets = groups.setdefault(key, [[]])
            if buckets[-1] and filled[key] + size > self.bucket:
                buckets.append([])
                filled[key] = 0
            buckets[-1].append(op)
            filled[key] = filled.get(key, 0) + size
        return [p for _, bs in sorted(groups.items(), key=lambda kv: kv[0][0]) for b in bs for p in _packable(b)]

    @staticmethod
    def _pack(packer: Packer, ops: list, anchor: ir.Operation) -> None:
        """One collective for `ops`, placed before `anchor` (after the whole run: earlier rounds are
        placed first, and operands from outside the run precede it)."""
        like, xs = ops[-1].operation, [o.operation.operands[0] for o in ops]
        with ir.InsertionPoint(anchor):
            new = packer.all_reduce(like, xs) if op_name(like) == "sp.all_reduce" else \
                packer.all_to_all(like, xs, [shape(o.operation.results[0]) for o in ops])
        for op, value in zip(ops, new):
            op.operation.results[0].replace_all_uses_with(value)
        for op in ops:
            op.operation.erase()
