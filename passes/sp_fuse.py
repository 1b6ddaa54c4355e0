"""sp-fuse: outline fusible regions of @forward and @backward into kernel functions.

A region is a set of ops that one kernel launch can compute in a single pass over a *domain*, a
static shape [rows..., N] (ops.FUSIBLE, ROW_REDUCTIONS, ROW_OPS, ONE_HOT):
  - elementwise ops whose result is the domain, or one value per row of it ([rows..., 1]);
  - reductions over the last dim with keepdim (RMSNorm's mean, a softmax's max and sum);
  - whole-row ops whose result is the domain (log-softmax and its backward) and the loss gradient's
    one-hot rows (nll_loss_backward), so the LM head's loss backward is one kernel.
Operands broadcast into the domain (a weight [N], a row statistic [rows..., 1], a scalar). So the
RMSNorm chain, a residual add with the norm after it, SwiGLU's silu * up, RoPE (its halves: last-dim
pieces of an input or of a value it computes, see `regions`) and their backwards each become one
kernel; matmuls, attention, collectives and views stay as they are (the kernel's inputs and outputs
are whatever they read and make).

Regions grow greedily in program order. An op joins the region(s) its operands come from when the
domains agree and no op outside the region has read the region's values yet ("open"): the call
then sits at the region's last op, after every input and before every outside reader, so outlining
never reorders a dependence. Its inputs then live until the call: an op after host ops does not
join a region whose inputs, read for the last time inside it, would thereby raise the function's
peak (sp-plan-memory's simulation of the unfused function), as a chunked bf16 weight gradient's
parts, each cast and added into the f32 sum, would as one kernel after the last chunk.

A closed region then takes in a *sibling* (`_siblings`): a region of its domain called later that
reads its results or a value it reads, whose inputs all exist at its call, and that starts at most
MAX_HOISTED ops after it, or even before it (SwiGLU's backward: d(up) = g * silu(gate) and d(gate)
both read g, and d(up)'s matmuls read d(up) in between; RMSNorm's backward and its weight gradient's
product, whose column sum comes in between, in either order). The sibling's ops move up into that
call, so its results live at most MAX_HOISTED ops longer: a merge that would raise the function's
peak (sp-plan-memory's simulation) is not made. Regions of fewer than `min_ops` ops stay ATen calls.

Each region becomes `func.func private @<function>_k<n>` with `sp.kernel = {domain, ops}` and the
ops moved into it (constants copied), called by `func.call`: device-neutral IR that the host
lowering runs as the ATen ops it holds (the fallback) and codegen lowers to a Triton kernel.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import takewhile
from typing import ClassVar

from torch_mlir import ir
from torch_mlir.dialects import func as func_d

from .base import Pass, option
from .ops import A, CAT, CONSTANT, FUSIBLE, LIST, MAX_KERNEL_ROW, ONE_HOT, PIECES, ROW_OPS, ROW_REDUCTIONS, UNARY, \
    UNPACK
from .sp_plan_memory import Simulation, last_reads, nbytes, saved_storage   # which imports nothing of sp-fuse
from .torch_ir import body_ops, const_value, funcs_of, is_free, is_tensor, is_tensor_list, op_name, shape


MAX_HOISTED = 4   # the most host ops a sibling region's results are made earlier than they were


@dataclass(eq=False)   # regions are compared by identity
class _Region:
    domain: list[int]
    ops: list = field(default_factory=list)
    open: bool = True
    call_at: ir.Operation | None = None   # where the call goes when siblings moved in: the first one's last op
    last: int = -1                        # the index of its last op (while regions grow)


def _rows(domain: list[int]) -> list[int] | None:
    return domain[:-1] + [1] if domain else None


def _merged(a: list[int], b: list[int]) -> list[int] | None:
    """The domain of a region holding ops of domains a and b, or None when one pass cannot do both."""
    if a == b:
        return a
    if _rows(b) == a:
        return b
    if _rows(a) == b:
        return a
    return None


def _constant(v: ir.Value) -> bool:
    """A constant operand (copied into the kernel), a list of constants included."""
    owner = v.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)):
        return False
    return op_name(owner).startswith(CONSTANT) or (op_name(owner) == LIST and const_value(v)[0])


def _domain(op) -> list[int] | None:
    """The domain an op computes over if it can be fused, else None (also where a row is wider than a
    kernel's block, MAX_KERNEL_ROW: such a kernel could not be generated, and the ATen ops it would run
    instead keep intermediates that the memory plan, counting a kernel's inputs and outputs, misses)."""
    d = _fusible_domain(op)
    return d if d is None or not d or d[-1] <= MAX_KERNEL_ROW else None


def _fusible_domain(op) -> list[int] | None:
    name = op_name(op)
    o = op.operation
    if len(o.results) != 1 or not is_tensor(o.results[0]):
        return None
    if not all(is_tensor(x) or _constant(x) for x in o.operands):
        return None   # a scalar computed at run time
    result = shape(o.results[0])
    if -1 in result:
        return None
    if name in FUSIBLE:
        return result
    if name in ROW_OPS:
        x = o.operands[ROW_OPS[name]]
        whole = name != A + "_log_softmax" or const_value(o.operands[2]) == (True, False)   # no half_to_float
        return result if _last_dim(o.results[0], x) and whole else None
    if name == ONE_HOT:
        grad, _, target, weight, reduction, _, total = o.operands
        ok = shape(grad) == [] == shape(total) and len(result) == 2 and shape(target) == result[:1] \
            and const_value(weight) == (True, None) and const_value(reduction)[1] in (1, 2)
        return result if ok else None
    if name in ROW_REDUCTIONS:
        x = shape(o.operands[0])
        ok_d, dims = const_value(o.operands[1])
        ok_k, keep = const_value(o.operands[2])
        last = ok_d and isinstance(dims, list) and len(dims) == 1 and x and dims[0] % len(x) == len(x) - 1
        dtype_ok = name == "torch.aten.amax" or const_value(o.operands[3]) == (True, None)
        if last and ok_k and keep and dtype_ok and -1 not in x:
            return x
    return None


def _last_dim(x: ir.Value, dim: ir.Value) -> bool:
    ok, d = const_value(dim)
    n = len(shape(x))
    return ok and isinstance(d, int) and n > 0 and d % n == n - 1 and -1 not in shape(x)


def _pieces_of(op) -> ir.Value | None:
    """The value a last-dim slice or split cuts (RoPE's halves), else None."""
    name, x = op_name(op), list(op.operation.operands)
    if name == PIECES[0] and is_tensor(x[0]) and _last_dim(x[0], x[1]) and const_value(x[4]) == (True, 1) \
            and all(isinstance(const_value(v)[1], int) for v in x[2:4]):
        return x[0]
    if name == PIECES[1] and is_tensor(x[0]) and _last_dim(x[0], x[2]) and isinstance(const_value(x[1])[1], int):
        return x[0]
    return None


def _same(a: ir.Value | None, b: ir.Value) -> bool:
    return a is not None and a == b


def _carries_piece(o) -> bool:
    """An op whose results are pieces when its operand is: an unpack, a unary op of one tensor."""
    name = op_name(o)
    return name == UNPACK or name in FUSIBLE and name in UNARY and sum(map(is_tensor, o.operands)) == 1


def _piece_root(v: ir.Value) -> ir.Value | None:
    """The value that v is a piece of, through unpacks and unary ops of pieces, else None."""
    while isinstance(v.owner, (ir.Operation, ir.OpView)):
        o = v.owner
        if _pieces_of(o) is not None:
            return _pieces_of(o)
        if not _carries_piece(o):
            return None
        v = next(x for x in o.operands if is_tensor(x) or is_tensor_list(x))
    return None


def _rejoined(src: ir.Value) -> bool:
    """Whether every piece cut from src is only ever put back together: read by unpacks and unary ops
    of pieces, ending in last-dim cats of pieces of src. Then cutting them in the kernel computing src
    cannot leave that kernel with a piece read outside (which would undo the whole kernel)."""
    def inside(v: ir.Value) -> bool:
        for u in v.uses:
            o = u.owner
            if _carries_piece(o):
                if not all(inside(r) for r in o.results):
                    return False
            elif op_name(o) == LIST:
                cats = [w.owner for w in o.results[0].uses]
                if not cats or not all(op_name(c) == CAT and _last_dim(c.results[0], c.operands[1]) for c in cats) \
                        or not all(_same(_piece_root(e), src) for e in o.operands):
                    return False
            else:
                return False
        return True
    return all(inside(r) for u in src.uses if _same(_pieces_of(u.owner), src) for r in u.owner.results)


def regions(func, min_ops: int, owned: dict[int, tuple[int, int]] | None = None) -> list[_Region]:
    """The fusible regions of one function, each of at least min_ops ops, in program order, closed
    regions merged with their siblings where that does not raise the function's peak (its arguments
    in `owned` counted as sp-plan-memory counts them: Simulation).

    Beside the domain's values, a region may hold *pieces*: last-dim slices of one of its inputs or
    of a value it computes when every piece of that value is put back (`_rejoined`; a slice, or a
    split and its unpack), elementwise ops of one piece, and a last-dim cat of pieces back into the
    domain (RoPE's rotate_half, forward, and backward where the rotated value is g * sin). A piece
    never leaves its kernel: codegen evaluates a piece of a computed value again at its columns."""
    owner: dict[ir.Value, _Region] = {}
    found: list[_Region] = []
    pieces: set[ir.Value] = set()
    lists: dict[ir.Value, ir.Operation] = {}   # a list of tensors -> the op that builds it
    ops = body_ops(func)
    last_read = last_reads(ops)
    # arguments the simulation never frees (all but the saved values in `owned`): holding them is free
    resident = {a for n, a in enumerate(func.regions[0].blocks[0].arguments) if n not in (owned or {})}
    unfused = functools.cache(lambda: _unfused_moments(func, ops, owned))

    def merge(into: _Region, r: _Region) -> None:
        into.ops += r.ops
        into.last = max(into.last, r.last)
        for o in r.ops:
            for v in o.operation.results:
                owner[v] = into
        found.remove(r)

    def holds(r: _Region, i: int) -> bool:
        """Whether op i joining r would raise the function's peak: the inputs of r read for the last
        time inside it would live until op i (scalars are not counted)."""
        if i == r.last + 1:
            return False
        inner = {v for x in r.ops for v in x.operation.results}
        held = sum(nbytes(x) for x in {x for y in r.ops for x in y.operation.operands}
                   if x not in inner and x not in resident and is_tensor(x) and shape(x)
                   and last_read.get(x, i) <= r.last)
        if not held:
            return False
        peak, moments = unfused()
        return max(moments[r.last + 1:i]) + held > peak

    for i, op in enumerate(ops):
        name, o = op_name(op), op.operation
        if name == LIST and any(is_tensor(x) for x in o.operands):
            lists[o.results[0]] = op   # read through by its reader
            continue
        operands = [e for x in o.operands for e in (list(lists[x].operands) if x in lists else [x])]
        reads = [owner[x] for x in operands if x in owner]
        open_piece = lambda v: v in pieces and owner[v].open  # noqa: E731
        joined, members, cut = None, [op], False
        if (src := _pieces_of(op)) is not None:
            cut, source = True, owner.get(src)
            if source is not None and source.open and _merged(source.domain, shape(src)) is not None \
                    and _rejoined(src):
                joined = source   # pieces of a value the kernel computes
                joined.domain = _merged(source.domain, shape(src))
            else:                 # pieces of a kernel input: a region of their own
                joined = _Region(shape(src))
                found.append(joined)
        elif _carries_piece(o) and open_piece(o.operands[0]) and (
                name == UNPACK or all(is_tensor(x) or _constant(x) for x in o.operands)):
            joined, cut = owner[o.operands[0]], True
        elif name == CAT and o.operands[0] in lists and _last_dim(o.results[0], o.operands[1]) \
                and all(open_piece(e) for e in lists[o.operands[0]].operands):
            joined = owner[lists[o.operands[0]].operands[0]]
            for r in dict.fromkeys(owner[e] for e in lists[o.operands[0]].operands):
                if r is not joined and _merged(joined.domain, r.domain) is not None:
                    merge(joined, r)
            if any(owner[e] is not joined for e in lists[o.operands[0]].operands) \
                    or _merged(joined.domain, shape(o.results[0])) is None:
                joined = None
            else:
                members = [lists[o.operands[0]], op]
        elif (d := _domain(op)) is not None:
            for r in dict.fromkeys(reads):   # each region once, in operand order
                merged = _merged(r.domain, d) if r.open and not holds(r, i) else None
                if merged is None:
                    continue
                if joined is None:
                    joined = r
                    joined.domain = merged
                elif _merged(joined.domain, r.domain) is not None:   # both open: one kernel
                    joined.domain = _merged(joined.domain, r.domain)
                    merge(joined, r)
            if joined is None:
                joined = _Region(d)
                found.append(joined)
        if joined is not None:
            joined.ops += members
            joined.last = i
            for v in o.results:
                owner[v] = joined
                if cut:
                    pieces.add(v)
        for r in reads:
            if r is not joined:
                r.open = False   # read outside: its call must come before this op
    # a piece read outside its kernel would have to be stored: such a region stays ATen ops
    found = [r for r in found if not any(
        v in pieces and any(u.owner not in {x.operation for x in r.ops} for u in v.uses)
        for x in r.ops for v in x.operation.results)]
    return _siblings(func, found, min_ops, owned)


def _unfused_moments(func, ops: list, owned: dict | None) -> tuple[int, list[int]]:
    """(the peak live bytes of func as it is, the live bytes at each of `ops`' moments; 0 for a
    constant or a list)."""
    sim = Simulation(func, owned)
    peak = sim.run()[0]
    moment = {o.operation: m for o, m in zip(sim.ops, sim.moments)}
    return peak, [moment.get(o.operation, 0) for o in ops]


def _siblings(func, found: list[_Region], min_ops: int, owned: dict | None) -> list[_Region]:
    """Each region, in the order of their calls, merged into the nearest region called before it that
    it may join as a sibling (see the module docstring), the merged region's call where the first
    one's was, unless the sibling's
    results, made that much earlier, would raise the function's peak: they are counted at every op
    they now live across, on the live bytes of the function fused without siblings (sp-plan-memory's
    simulation, `_moments`) plus the siblings already moved up (conservative: the earlier frees of
    the sibling's inputs are not counted). The regions of at least min_ops ops."""
    ops = body_ops(func)
    at = {o.operation: i for i, o in enumerate(ops)}
    counted = [not is_free(o) for o in ops]
    # the simulation, once and only when some sibling could merge (a forward usually has none)
    trial = functools.cache(lambda: _moments(func, [r for r in found if len(r.ops) >= min_ops], owned))
    extra = [0] * len(ops)   # bytes of siblings' results moved up, live at each op

    def produced(v: ir.Value) -> int:   # the index of v's defining op; -1 for an argument
        owner = v.owner
        return at[owner.operation if isinstance(owner, ir.OpView) else owner] \
            if isinstance(owner, (ir.Operation, ir.OpView)) else -1

    def inputs(r: _Region) -> set[ir.Value]:
        inner = {v for o in r.ops for v in o.operation.results}
        return {x for o in r.ops for x in o.operation.operands if x not in inner and not _constant(x)}

    def call(r: _Region) -> int:
        return at[r.call_at] if r.call_at is not None else max(at[o.operation] for o in r.ops)

    kept: list[_Region] = []
    for y in sorted(found, key=call):   # by call: a region may start before an earlier call
        first, ins = min(at[o.operation] for o in y.ops), inputs(y)
        inner = {o.operation for o in y.ops}
        out = sum(nbytes(v) for o in y.ops for v in o.operation.results if is_tensor(v)
                  and any(u.owner not in inner for u in v.uses))
        near = takewhile(lambda x: call(x) >= first or sum(counted[call(x) + 1:first]) <= MAX_HOISTED,
                         reversed(kept))   # the nearest first: the least hoisting
        for x in near:
            c = call(x)
            made = {v for o in x.ops for v in o.operation.results}
            domain = _merged(x.domain, y.domain)
            related = ins & made or {v for v in ins & inputs(x) if produced(v) >= 0}
            if domain is None or not related or c >= call(y) or not all(v in made or produced(v) < c for v in ins):
                continue
            peak, moments = trial()
            span = range(c, first if first > c else call(y))
            if max(moments[t] + extra[t] for t in span) + out <= peak:
                for t in span:
                    extra[t] += out
                x.call_at = ops[c].operation
                x.domain, x.ops = domain, x.ops + y.ops
                break
        else:
            kept.append(y)
    return [r for r in kept if len(r.ops) >= min_ops]


def _moments(func, regs: list[_Region], owned: dict | None) -> tuple[int, list[int]]:
    """The function's peak live bytes with these regions outlined (sp-plan-memory's simulation, on a
    copy of the function erased with its kernels), and the live bytes at each of its ops' moments, by
    op of `func` (a fused op: its kernel's call; a constant: 0)."""
    copy = func.clone(ir.InsertionPoint(func))
    copy.attributes["sym_name"] = ir.StringAttr.get("sp_fuse_trial")
    ops, twin = body_ops(func), body_ops(copy)
    index = {o.operation: i for i, o in enumerate(ops)}
    names = [f"sp_fuse_trial_k{n}" for n in range(len(regs))]
    for name, r in zip(names, regs):
        _outline(copy, _Region(r.domain, [twin[index[o.operation]] for o in r.ops]), name)
    calls = {ir.FlatSymbolRefAttr(o.operation.attributes["callee"]).value: o.operation
             for o in body_ops(copy) if op_name(o) == "func.call"}
    # what stands for each op of func in the copy (constants: nothing, outlining may erase them)
    stands = [None if is_free(o) else t.operation for o, t in zip(ops, twin)]
    for name, r in zip(names, regs):
        for o in r.ops:
            stands[index[o.operation]] = calls[name]
    sim = Simulation(copy, owned)
    peak = sim.run()[0]
    moment = {o.operation: m for o, m in zip(sim.ops, sim.moments)}
    moments = [0 if o is None else moment.get(o, 0) for o in stands]
    module_body = func.parent.regions[0].blocks[0]
    for op in list(module_body.operations):
        if op.operation.name == "func.func" and ir.StringAttr(op.operation.attributes["sym_name"]).value in \
                {"sp_fuse_trial", *names}:
            op.operation.erase()
    return peak, moments


def _outline(func, region: _Region, name: str):
    ops = sorted(region.ops, key=body_ops(func).index)
    members = {v for o in ops for v in o.operation.results}
    inputs: list[ir.Value] = []
    for o in ops:
        for x in o.operation.operands:
            if x not in members and not _constant(x) and x not in inputs:
                inputs.append(x)
    inner = {o.operation for o in ops}
    outputs = [v for o in ops for v in o.operation.results if any(u.owner not in inner for u in v.uses)]
    last = region.call_at or ops[-1].operation
    with ir.InsertionPoint(last), last.location:
        call = func_d.CallOp([v.type for v in outputs], ir.FlatSymbolRefAttr.get(name), inputs)
    for v, new in zip(outputs, call.results):
        v.replace_all_uses_except(new, [o.operation for o in ops])

    module_body = func.parent.regions[0].blocks[0]
    with ir.InsertionPoint(module_body), last.location:
        kernel = func_d.FuncOp(name, ([v.type for v in inputs], [v.type for v in outputs]), visibility="private")
        block = kernel.add_entry_block()
        i64 = ir.IntegerType.get_signless(64)
        kernel.operation.attributes["sp.kernel"] = ir.DictAttr.get({
            "domain": ir.DenseI64ArrayAttr.get(region.domain), "ops": ir.IntegerAttr.get(i64, len(ops))})
    with ir.InsertionPoint(block), last.location:
        ret = func_d.ReturnOp(outputs)
    for o in ops:
        o.operation.move_before(ret)
    mapping = dict(zip(inputs, block.arguments))
    copied: list[ir.Value] = []
    copies = ir.InsertionPoint(ops[0].operation)   # constants go before the kernel's first op

    def inside(v: ir.Value) -> ir.Value:
        if v in members:
            return v
        if v not in mapping:   # a constant: copied (a list's elements first)
            src = v.owner.operation
            elements = [inside(x) for x in src.operands]
            copy = src.clone(copies)
            for i, x in enumerate(elements):
                copy.operands[i] = x
            mapping[v] = copy.results[0]
            copied.append(v)
        return mapping[v]

    for o in ops:
        for i, x in enumerate(list(o.operation.operands)):
            o.operation.operands[i] = inside(x)
    # the host's constants that only the moved ops read (a list before its elements)
    for v in reversed(copied):
        if not list(v.uses):
            v.owner.operation.erase()
    return kernel


@dataclass
class Fuse(Pass):
    """outline fusible regions of @forward / @backward into kernel functions (func.call)"""
    name: ClassVar[str] = "sp-fuse"
    min_ops: int = option(2, "the fewest ops a kernel holds; smaller regions stay ATen calls", minimum=1)

    def run(self, module_op) -> None:
        forward = None
        for f in funcs_of(module_op):
            self.fuse(f, forward)
            forward = f if ir.StringAttr(f.attributes["sym_name"]).value == "forward" else forward

    def fuse(self, f, forward=None) -> list:
        """Outline f's regions (a @backward's peak counts the saved values `forward`, fused, returns);
        the kernel functions made."""
        fname = ir.StringAttr(f.attributes["sym_name"]).value
        owned = saved_storage(Simulation(forward).run()[3], f) if fname == "backward" and forward else None
        return [_outline(f, region, f"{fname}_k{n}") for n, region in enumerate(regions(f, self.min_ops, owned))]
