"""Reading and building `torch` dialect IR from Python passes."""
from __future__ import annotations

import re
from typing import Any

from torch_mlir import ir

from autosp.dialects.sp import vtensor_shape
from .ops import CONSTANT, LIST

_VT = re.compile(r"!torch\.vtensor<\[[^\]]*\],([^>]+)>")
I64 = lambda: ir.IntegerType.get_signless(64)  # noqa: E731


def op_name(op) -> str:
    """The op's semantic name: `torch.operator` ops report their `name` attribute."""
    op = op.operation
    if op.name == "torch.operator":
        return ir.StringAttr(op.attributes["name"]).value
    return op.name


def is_free(op) -> bool:
    """A constant or a list of values: an operand, never an instruction (no launch, no memory)."""
    return op_name(op).startswith(CONSTANT) or op_name(op) == LIST


def int_attr(op, name: str) -> int:
    return ir.IntegerAttr(op.operation.attributes[name]).value


def funcs_of(module) -> list[ir.Operation]:
    """The step's functions (@forward / @backward after sp-plan-remat), not sp-fuse's kernels."""
    return [f for f in _funcs(module) if "sp.kernel" not in f.attributes]


def kernels_of(module) -> list[ir.Operation]:
    """The kernel functions sp-fuse outlined."""
    return [f for f in _funcs(module) if "sp.kernel" in f.attributes]


def _funcs(module) -> list[ir.Operation]:
    op = module.operation
    return [o.operation for o in op.regions[0].blocks[0].operations if o.operation.name == "func.func"]


def func_of(module) -> ir.Operation:
    """The step function: the single func.func of a module (an ir.Module or the module op)."""
    from .base import PassError
    funcs = funcs_of(module)
    if len(funcs) != 1:
        raise PassError(f"expected the module to hold one step function (func.func), found {len(funcs)}",
                        module.operation.location)
    return funcs[0]


def body_ops(func) -> list:
    return list(func.regions[0].blocks[0].operations)


def ancestors(v: ir.Value) -> set[ir.Operation]:
    """Every op v depends on."""
    seen: set[ir.Operation] = set()
    stack = [v]
    while stack:
        owner = stack.pop().owner
        if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.operation in seen:
            continue
        seen.add(owner.operation)
        stack.extend(owner.operation.operands)
    return seen


def strings(attr) -> list[str]:
    return [ir.StringAttr(a).value for a in ir.ArrayAttr(attr)]


def string_array(xs: list[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(x) for x in xs])


def location_str(loc: ir.Location) -> str:
    """file:line of a location (inside a module-path NameLoc or a callsite), or '' when unknown."""
    m = re.search(r'"([^"]+)":(\d+):(\d+)', str(loc))
    return f"{m.group(1)}:{m.group(2)}" if m else ""


def location_module(loc: ir.Location) -> str:
    """The nn.Module path a location names (capture wraps model lines in it), or ''."""
    m = re.match(r'loc\("([^"]+)"\(', str(loc))
    return m.group(1) if m else ""


def is_tensor(v: ir.Value) -> bool:
    return str(v.type).startswith("!torch.vtensor")


def is_tensor_list(v: ir.Value) -> bool:
    return str(v.type).startswith("!torch.list<vtensor")


def shape(v: ir.Value) -> list[int]:
    s = vtensor_shape(v.type)
    if s is None:
        raise TypeError(f"not a tensor: {v.type}")
    return s


def dtype_str(t: ir.Type) -> str:
    m = _VT.fullmatch(str(t))
    if not m:
        raise TypeError(f"not a tensor type: {t}")
    return m.group(1)


def vtensor(shape_: list[int], dtype: str) -> ir.Type:
    return ir.Type.parse(f"!torch.vtensor<[{','.join(str(d) for d in shape_)}],{dtype}>")


def with_shape(t: ir.Type, shape_: list[int]) -> ir.Type:
    return vtensor(shape_, dtype_str(t))


def const_value(v: ir.Value) -> tuple[bool, Any]:
    """(True, python value) for a torch constant / list of constants, else (False, None)."""
    owner = v.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)):
        return False, None
    o = owner.operation
    n = o.name
    if n == "torch.constant.none":
        return True, None
    if n in ("torch.constant.int", "torch.constant.bool"):
        a = o.attributes["value"]
        return True, (ir.BoolAttr(a).value if n.endswith("bool") else ir.IntegerAttr(a).value)
    if n == "torch.constant.float":
        return True, ir.FloatAttr(o.attributes["value"]).value
    if n == "torch.constant.str":
        return True, ir.StringAttr(o.attributes["value"]).value
    if n == "torch.constant.device":
        return True, ir.StringAttr(o.attributes["value"]).value
    if n == "torch.prim.ListConstruct":
        vals = [const_value(x) for x in o.operands]
        if all(ok for ok, _ in vals):
            return True, [x for _, x in vals]
    return False, None


def int_list(v: ir.Value) -> list[int] | None:
    ok, val = const_value(v)
    return val if ok and isinstance(val, list) else None


def const_int(value: int) -> ir.Value:
    return ir.Operation.create("torch.constant.int", results=[ir.Type.parse("!torch.int")],
                               attributes={"value": ir.IntegerAttr.get(I64(), int(value))}).results[0]


def const_float(value: float) -> ir.Value:
    return ir.Operation.create("torch.constant.float", results=[ir.Type.parse("!torch.float")],
                               attributes={"value": ir.FloatAttr.get(ir.F64Type.get(), float(value))}).results[0]


def const_bool(value: bool) -> ir.Value:
    return ir.Operation.create("torch.constant.bool", results=[ir.Type.parse("!torch.bool")],
                               attributes={"value": ir.BoolAttr.get(bool(value))}).results[0]


def const_none() -> ir.Value:
    return ir.Operation.create("torch.constant.none", results=[ir.Type.parse("!torch.none")]).results[0]


def int_list_value(values: list[int]) -> ir.Value:
    items = [const_int(x) for x in values]
    return ir.Operation.create("torch.prim.ListConstruct", results=[ir.Type.parse("!torch.list<int>")],
                               operands=items).results[0]


def aten(name: str, operands: list[ir.Value], result_types: list[ir.Type]) -> ir.Operation:
    """Create `torch.aten.<name>` at the current insertion point."""
    return ir.Operation.create(f"torch.aten.{name}", results=result_types, operands=operands)

