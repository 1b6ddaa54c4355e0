"""sp-fuse: outline fusible regions of @forward and @backward into kernel functions.

A region is a set of ops that one kernel launch can compute in a single pass over a *domain*, a
static shape [rows..., N] (ops.FUSIBLE and ops.ROW_REDUCTIONS):
  - elementwise ops whose result is the domain, or one value per row of it ([rows..., 1]);
  - reductions over the last dim with keepdim (RMSNorm's mean, a softmax's max and sum).
Operands broadcast into the domain (a weight [N], a row statistic [rows..., 1], a scalar). So the
RMSNorm chain, a residual add with the norm after it, SwiGLU's silu * up, RoPE's multiply-adds and
their backwards each become one kernel; matmuls, attention, collectives, views and
split/cat stay as they are (the kernel's inputs and outputs are whatever they read and make).

Regions grow greedily in program order. An op joins the region(s) its operands come from when the
domains agree and no op outside the region has read the region's values yet ("open"): the call
then sits at the region's last op, after every input and before every outside reader, so outlining
never reorders a dependence. Regions of fewer than `min_ops` ops stay ATen calls.

Each region becomes `func.func private @<function>_k<n>` with `sp.kernel = {domain, ops}` and the
ops moved into it (constants copied), called by `func.call`: device-neutral IR that the host
lowering runs as the ATen ops it holds (the fallback) and codegen lowers to a Triton kernel.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from torch_mlir import ir
from torch_mlir.dialects import func as func_d

from .base import Pass, option
from .ops import CONSTANT, FUSIBLE, LIST, ROW_REDUCTIONS
from .torch_ir import body_ops, const_value, funcs_of, is_tensor, op_name, shape


@dataclass(eq=False)   # regions are compared by identity
class _Region:
    domain: list[int]
    ops: list = field(default_factory=list)
    open: bool = True


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
    """The domain an op computes over if it can be fused, else None."""
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
    if name in ROW_REDUCTIONS:
        x = shape(o.operands[0])
        ok_d, dims = const_value(o.operands[1])
        ok_k, keep = const_value(o.operands[2])
        last = ok_d and isinstance(dims, list) and len(dims) == 1 and x and dims[0] % len(x) == len(x) - 1
        dtype_ok = name == "torch.aten.amax" or const_value(o.operands[3]) == (True, None)
        if last and ok_k and keep and dtype_ok and -1 not in x:
            return x
    return None


def regions(func, min_ops: int) -> list[_Region]:
    """The fusible regions of one function, each of at least min_ops ops, in program order."""
    owner: dict[ir.Value, _Region] = {}
    found: list[_Region] = []
    for op in body_ops(func):
        reads = [owner[x] for x in op.operation.operands if x in owner]
        d = _domain(op)
        joined = None
        if d is not None:
            for r in dict.fromkeys(reads):   # each region once, in operand order
                merged = _merged(r.domain, d) if r.open else None
                if merged is None:
                    continue
                if joined is None:
                    joined = r
                    joined.domain = merged
                elif _merged(joined.domain, r.domain) is not None:   # both open: one kernel
                    joined.domain = _merged(joined.domain, r.domain)
                    joined.ops += r.ops
                    for o in r.ops:
                        for v in o.operation.results:
                            owner[v] = joined
                    found.remove(r)
            if joined is None:
                joined = _Region(d)
                found.append(joined)
            joined.ops.append(op)
            for v in op.operation.results:
                owner[v] = joined
        for r in reads:
            if r is not joined:
                r.open = False   # read outside: its call must come before this op
    return [r for r in found if len(r.ops) >= min_ops]


def _outline(func, region: _Region, name: str) -> None:
    ops = sorted(region.ops, key=body_ops(func).index)
    members = {v for o in ops for v in o.operation.results}
    inputs: list[ir.Value] = []
    for o in ops:
        for x in o.operation.operands:
            if x not in members and not _constant(x) and x not in inputs:
                inputs.append(x)
    inner = {o.operation for o in ops}
    outputs = [v for v in members if any(u.owner not in inner for u in v.uses)
               or any(op_name(u.owner) == "func.return" for u in v.uses)]
    outputs.sort(key=lambda v: (ops.index(next(o for o in ops if v in list(o.operation.results)))))
    last = ops[-1]
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
        return mapping[v]

    for o in ops:
        for i, x in enumerate(list(o.operation.operands)):
            o.operation.operands[i] = inside(x)
    # the host's constants that only the moved ops read (a list before its elements)
    for v in reversed([v for v in mapping if isinstance(v, ir.OpResult)]):
        if not list(v.uses):
            v.owner.operation.erase()


@dataclass
class Fuse(Pass):
    """outline fusible regions of @forward / @backward into kernel functions (func.call)"""
    name: ClassVar[str] = "sp-fuse"
    min_ops: int = option(2, "the fewest ops a kernel holds; smaller regions stay ATen calls", minimum=1)

    def run(self, module_op) -> None:
        for f in funcs_of(module_op):
            fname = ir.StringAttr(f.attributes["sym_name"]).value
            for n, region in enumerate(regions(f, self.min_ops)):
                _outline(f, region, f"{fname}_k{n}")
