"""The building blocks both tilers of sp-tile-sequence share: the LM head's (sp_tile_sequence.py)
and the wide token-local regions' (sp_tile_sequence_mlp.py). Chunk bounds, the ops they create (at the
location and layout of the op each stands for, checked on meta tensors), hoisting what a tiled
phase reads above it, erasing what was tiled, and the module's record of it (`sp.tiles`).
"""
from __future__ import annotations

from torch_mlir import ir

from .aten_call import meta_shapes
from .layouts import Layout
from .base import PassError
from .ops import A, LIST
from .torch_ir import aten, const_int, is_free, is_tensor, location_module, location_str, op_name, shape, string_array, with_shape



class NoMatch(Exception):
    """The IR does not have the tileable form here: the tiler leaves it as it is."""


def owner(v: ir.Value) -> ir.Operation | None:
    o = v.owner
    return o.operation if isinstance(o, (ir.Operation, ir.OpView)) else None


def uses(v: ir.Value) -> list[tuple[ir.Operation, int]]:
    return [(u.owner.operation, u.operand_number) for u in v.uses]


def bounds(tokens: int, n: int) -> list[tuple[int, int]]:
    """n balanced [start, end) row ranges covering tokens, the larger chunks first."""
    base, extra = divmod(tokens, n)
    out, start = [], 0
    for c in range(n):
        end = start + base + (1 if c < extra else 0)
        out.append((start, end))
        start = end
    return out


# The default floor of the automatic chunk count: below it a chunk's tile saves too little memory to
# pay for its ops (each chunk repeats the region's ops: their dispatch on CPU, launches on a GPU).
DEFAULT_FLOOR = 4 << 20
# Under a memory budget the floor is at most this share of it: what a tile kept whole costs is then
# small beside the budget, so a step that fits tiled is not refused for the floor's sake.
BUDGET_SHARE = 64


def floor_for(budget: int | None) -> int:
    """The automatic chunk count's floor for a per-rank memory budget (None: no budget)."""
    return DEFAULT_FLOOR if budget is None else min(DEFAULT_FLOOR, budget // BUDGET_SHARE)


def auto_chunks(by_width: int, whole_bytes: int, floor: int, limit: int) -> int:
    """The width rule's chunk count, lowered so that no chunk's tile is below `floor` bytes (0: no
    floor): a tile of a few hundred KiB is kept whole. In [1, limit]."""
    n = min(by_width, whole_bytes // floor) if floor else by_width
    return max(1, min(n, limit))


def erase_dead_constants(ops: list) -> None:
    """Erase the constants and constant lists among ops (and what they read) left without readers."""
    cands, stack = [], list(ops)
    while stack:                      # collect first: an erased op cannot be compared any more
        o = stack.pop()
        if o in cands or not is_free(o):
            continue
        cands.append(o)
        stack.extend(x for x in map(owner, o.operands) if x is not None)
    while True:
        dead = [o for o in cands if not any(list(r.uses) for r in o.results)]
        if not dead:
            return
        for o in dead:
            cands.remove(o)
        for o in dead:
            o.erase()


def erase_all(ops: list) -> None:
    """Erase ops, whose readers are all among them by now, then the constants only they read."""
    dead = list(ops)
    dead_set = set(dead)
    inputs = [o for op in dead for o in map(owner, op.operands) if o is not None and o not in dead_set]
    while dead:
        unused = [op for op in dead if not any(list(r.uses) for r in op.results)]
        if not unused:
            raise PassError(f"internal: {op_name(dead[0])} still has readers after tiling", dead[0].location)
        for op in unused:
            dead.remove(op)
            op.erase()
    erase_dead_constants(inputs)


def hoist_plan(point: ir.Operation, reads: list[ir.Value], forbidden: set, why: str) -> list[ir.Operation]:
    """The definitions of `reads` that come after `point` (and what they read), in an order they can
    move before it; NoMatch(why) if one of them is in `forbidden` (it depends on what is tiled)."""
    moves, seen = [], set()

    def visit(v: ir.Value) -> None:
        o = owner(v)
        if o is None or o in seen or o.is_before_in_block(point):
            return
        if o in forbidden:
            raise NoMatch(why)
        seen.add(o)
        for x in o.operands:
            visit(x)
        moves.append(o)

    for v in reads:
        visit(v)
    return moves


def record(module_op, kind: str, loc: ir.Location, chunks: int, tokens: int, width: int) -> None:
    """Note in the module's `sp.tiles` (read by plan.json and `autospc inspect`) what was cut: kind
    ("lm_head" | "mlp"), the module it is in, the chunk count, the [tokens, width] it is no longer."""
    where = location_module(loc)
    where = where.rsplit(".", 1)[0] if kind == "mlp" and "." in where else where or location_str(loc)
    i64 = ir.IntegerType.get_signless(64)
    entry = ir.DictAttr.get({"kind": ir.StringAttr.get(kind), "module": ir.StringAttr.get(where),
                             "chunks": ir.IntegerAttr.get(i64, chunks), "tokens": ir.IntegerAttr.get(i64, tokens),
                             "width": ir.IntegerAttr.get(i64, width)})
    old = list(ir.ArrayAttr(module_op.attributes["sp.tiles"])) if "sp.tiles" in module_op.attributes else []
    module_op.attributes["sp.tiles"] = ir.ArrayAttr.get(old + [entry])


class Builder:
    """Creates ops at the current insertion point, at the location (and layout) of the op each
    stands for, and checks the ATen ones on meta tensors."""

    def __init__(self) -> None:
        self.created: list[ir.Operation] = []
        self.shared_constants()

    def shared_constants(self) -> None:
        """Constants made from now on are shared by the ops created after them: call it again where
        ops are next created elsewhere than after the constants made so far."""
        self.ints: dict[int, ir.Value] = {}
        self.lists: dict[tuple[int, ...], ir.Value] = {}

    def const(self, like, value: int) -> ir.Value:
        """A torch.constant.int (shared)."""
        if value not in self.ints:
            with like.location:
                self.ints[value] = const_int(value)
        return self.ints[value]

    def int_list(self, like, values: list[int]) -> ir.Value:
        """A list of torch.constant.int (shared)."""
        key = tuple(values)
        if key not in self.lists:
            items = [self.const(like, v) for v in values]
            with like.location:
                self.lists[key] = ir.Operation.create(LIST, results=[ir.Type.parse("!torch.list<int>")],
                                                      operands=items).results[0]
        return self.lists[key]

    def emit(self, like, name: str, operands: list, types: list, layout: Layout | None = None) -> ir.Operation:
        """torch.aten.<name>, with `layout` or else `like`'s (when it has as many results)."""
        with like.location:
            op = aten(name, operands, types)
        if layout is not None:
            op.attributes["sp.layout"] = string_array([str(layout)])
        elif "sp.layout" in like.attributes and len(types) == len(ir.ArrayAttr(like.attributes["sp.layout"])):
            op.attributes["sp.layout"] = like.attributes["sp.layout"]
        self.created.append(op)
        return op

    def view(self, like, v: ir.Value, sh: list[int], layout: Layout | None = None) -> ir.Value:
        return self.emit(like, "view", [v, self.int_list(like, sh)], [with_shape(v.type, sh)], layout).results[0]

    def cat(self, like, parts: list[ir.Value], dim: int, t: ir.Type, layout: Layout | None = None) -> ir.Value:
        with like.location:
            lst = ir.Operation.create(LIST, results=[ir.Type.parse("!torch.list<vtensor>")], operands=parts).results[0]
        return self.emit(like, "cat", [lst, self.const(like, dim)], [t], layout).results[0]

    def accumulate(self, like, acc: ir.Value | None, x: ir.Value) -> ir.Value:
        if acc is None:
            return x
        return self.emit(like, "add.Tensor", [acc, x, self.const(like, 1)], [acc.type]).results[0]

    def matmul_into(self, like, acc: ir.Value | None, a: ir.Value, b: ir.Value) -> ir.Value:
        """a @ b for the first chunk, then acc + a @ b (addmm: no separate partial product is live)."""
        t = like.results[0].type
        if acc is None:
            return self.emit(like, "mm", [a, b], [t]).results[0]
        one = self.const(like, 1)
        return self.emit(like, "addmm", [acc, a, b, one, one], [t]).results[0]

    def check(self) -> None:
        for op in self.created:
            if not op.name.startswith(A):
                continue                      # lists: their tensors' producers and readers are checked
            got = meta_shapes(op)
            want = [shape(r) for r in op.results if is_tensor(r)]
            if got is not None and got[:len(want)] != want:
                raise PassError(f"internal: tiled {op_name(op)} has types {want} but computes {got}", op.location)
