"""Lower the partitioned module to the rank-agnostic host program the runtime executes.

Every call is an allowlisted ATen overload or an sp op with its attributes; shapes, collectives
and sharding were all decided by the passes, the runtime only follows. Format (JSON):
{format_version, mesh, programs: {"forward": program, "backward": program}}, a program being
  args:         [{role, name, shape, dtype}]    role: param | buffer | input | saved
  results:      ["loss", "saved:0", ...] or ["grad:NAME", ...]
  instructions: [{op, args, kwargs | attrs, out, shapes, dtypes, loc, free}]
  outputs:      registers of the results
  kernels:      {name: kernel} the program's `sp.kernel` instructions call (sp-fuse): a kernel is
                {args: [{shape, dtype}], results: [{shape, dtype}], num_registers, instructions,
                outputs}, the ATen ops it replaced (what the runtime runs where no GPU object does)
Operands: {"r": reg} | {"c": json value} | {"l": [operands]} | {"dtype": name} |
{"memory_format": name} | {"layout": "strided"} | {"device": null} (the runtime's device).
"""
from __future__ import annotations

import itertools
import re
from typing import Any

import torch
from torch_mlir import ir

from autosp.passes.aten_call import ELEMENT_TYPES, decode, overload_name, schema_kind
from autosp.passes.attributes import func_attr
from autosp.passes.base import PassError
from autosp.passes.ops import CONSTANT, IDENTITY, LIST, UNPACK
from autosp.passes.torch_ir import body_ops, dtype_str, funcs_of, kernels_of, location_str, op_name, strings
from autosp.runtime.artifact import ALLOWED_ATEN, DTYPE_NAMES, FORMAT_VERSION, KERNEL

_SKIP = (CONSTANT, LIST)   # operands of the instructions that read them


def _encode(val: Any) -> Any:
    if isinstance(val, dict) and "r" in val:
        return val
    if isinstance(val, list):
        return {"l": [_encode(v) for v in val]}
    if isinstance(val, torch.dtype):
        return {"dtype": DTYPE_NAMES[val]}
    if isinstance(val, torch.memory_format):
        return {"memory_format": str(val).removeprefix("torch.")}
    if isinstance(val, torch.layout):
        return {"layout": "strided"}
    if isinstance(val, torch.device):
        return {"device": None}
    return {"c": val}


def _attr(a: ir.Attribute) -> Any:
    if isinstance(a, ir.BoolAttr):
        return ir.BoolAttr(a).value
    if isinstance(a, ir.IntegerAttr):
        i = ir.IntegerAttr(a)
        return bool(i.value) if str(i.type) == "i1" else i.value
    if isinstance(a, ir.FloatAttr):
        return ir.FloatAttr(a).value
    if isinstance(a, ir.StringAttr):
        return ir.StringAttr(a).value
    raise TypeError(f"unsupported attribute {a}")


def _tensor_spec(t: ir.Type) -> tuple[list[int], str]:
    return shape_of(t), DTYPE_NAMES[ELEMENT_TYPES[dtype_str(t)]]


def shape_of(t: ir.Type) -> list[int]:
    m = re.fullmatch(r"!torch\.vtensor<\[([^\]]*)\],[^>]+>", str(t))
    return [int(d) for d in m.group(1).split(",")] if m and m.group(1) else []


def lower_to_host_program(module) -> dict:
    """{format_version, mesh, programs: {function name: program}}; a compiled step has the two
    programs "forward" and "backward" (see sp-plan-remat), each with the kernels it calls."""
    top = module.operation
    mesh = ir.DictAttr(top.attributes["sp.mesh"]) if "sp.mesh" in top.attributes else None
    kernels = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in kernels_of(module)}
    return {
        "format_version": FORMAT_VERSION,
        "mesh": {k: _attr(mesh[k]) for k in ("sp", "dp", "order", "ulysses") if k in mesh} if mesh else {"sp": 1, "dp": 1},
        "programs": {ir.StringAttr(f.attributes["sym_name"]).value: lower_function(f, kernels) for f in funcs_of(module)},
    }


def lower_function(func, kernels: dict[str, ir.Operation]) -> dict:
    block = func.regions[0].blocks[0]
    args = []
    for role, a in zip(strings(func_attr(func, "sp.args")), block.arguments):
        kind, _, name = role.partition(":")
        s, dt = _tensor_spec(a.type)
        args.append({"role": kind, "name": name, "shape": s, "dtype": dt})
    body = _lower_body(func)
    called = sorted({i["attrs"]["name"] for i in body["instructions"] if i["op"] == KERNEL})
    return {"args": args, "results": strings(func_attr(func, "sp.results")), **body,
            **({"kernels": {k: lower_kernel(kernels[k]) for k in called}} if called else {})}


def lower_kernel(func) -> dict:
    """A kernel function (sp-fuse) as the ATen program it replaces: the runtime's fallback."""
    block = func.regions[0].blocks[0]
    spec = lambda t: dict(zip(("shape", "dtype"), _tensor_spec(t)))  # noqa: E731
    return {"args": [spec(a.type) for a in block.arguments],
            "results": [spec(t) for t in ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).results],
            **_lower_body(func)}


def _lower_body(func) -> dict:
    """{num_registers, instructions, outputs}: the arguments take the first registers."""
    block = func.regions[0].blocks[0]
    reg: dict[ir.Value, int] = {}
    count = itertools.count()

    def new_reg(v: ir.Value) -> int:
        reg[v] = next(count)
        return reg[v]

    for a in block.arguments:
        new_reg(a)

    def leaf(v: ir.Value) -> dict:
        if v not in reg:
            raise PassError(f"operand {v.get_name()} of type {v.type} is computed at run time by an op the "
                            "host program cannot express", func.location)
        return {"r": reg[v]}

    insts: list[dict] = []
    outputs: list[int] = []
    for op in body_ops(func):
        name = op_name(op)
        loc = location_str(op.location)
        if name.startswith(_SKIP):
            continue
        if name == "func.return":
            outputs = [reg[v] for v in op.operation.operands]
            continue
        if name in IDENTITY:   # values are immutable: a copy or detach is the same register
            reg[op.operation.results[0]] = reg[op.operation.operands[0]]
            continue
        inst: dict[str, Any] = {"loc": loc}
        if name == "func.call":   # a kernel of sp-fuse
            inst["op"], inst["args"] = KERNEL, [leaf(v) for v in op.operation.operands]
            inst["attrs"] = {"name": ir.FlatSymbolRefAttr(op.operation.attributes["callee"]).value}
        elif name.startswith("sp."):
            inst["op"] = name
            inst["args"] = [leaf(v) for v in op.operation.operands]
            attrs = op.operation.attributes
            # operandSegmentSizes: how an op with an optional operand counts them (the args say it)
            inst["attrs"] = {k: _attr(attrs[k]) for k in (attrs[i].name for i in range(len(attrs)))
                             if not k.startswith("sp.") and k != "operandSegmentSizes"}
        elif name == UNPACK:
            inst["op"], inst["args"] = "prim.unpack", [leaf(op.operation.operands[0])]
        else:
            qualified = overload_name(name)
            if qualified is None or qualified not in ALLOWED_ATEN:
                raise PassError(f"unsupported op {name.removeprefix('torch.')}: autosp's runtime does not "
                                "execute it", op.location)
            overload, a, kw = decode(op, leaf)
            _refuse_device(op, overload)
            inst["op"], inst["args"], inst["kwargs"] = qualified, [_encode(x) for x in a], \
                {k: _encode(x) for k, x in kw.items()}
        if "sp.in_place" in op.operation.attributes:   # sp-plan-memory's: results written into dying operands
            inst["attrs"]["in_place"] = list(ir.DenseI64ArrayAttr(op.operation.attributes["sp.in_place"]))
        inst["out"] = [new_reg(r) for r in op.operation.results]
        specs = [_tensor_spec(r.type) if str(r.type).startswith("!torch.vtensor") else (None, None)
                 for r in op.operation.results]
        inst["shapes"] = [s for s, _ in specs]
        inst["dtypes"] = [d for _, d in specs]
        insts.append(inst)

    # drop each register after its last reader, so activations die as early as the order allows
    last: dict[int, int] = {}
    for i, inst in enumerate(insts):
        for r in _regs(inst["args"]) + _regs(list(inst.get("kwargs", {}).values())):
            last[r] = i
    keep = set(outputs)
    for i, inst in enumerate(insts):
        inst["free"] = sorted(r for r in set(_regs(inst["args"]) + _regs(list(inst.get("kwargs", {}).values())))
                              if last[r] == i and r not in keep)
    return {"num_registers": next(count), "instructions": insts, "outputs": outputs}


def _refuse_device(op, overload: torch._ops.OpOverload) -> None:
    """An artifact runs on the device of its inputs: a device constant may only fill a Device
    argument (encoded as the run device); anywhere else the program would name the capture's device."""
    def devices(v: ir.Value) -> list[str]:
        owner = v.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)):
            return []
        o = owner.operation
        if o.name == "torch.constant.device":
            return [ir.StringAttr(o.attributes["value"]).value]
        return [d for x in o.operands for d in devices(x)] if o.name == LIST else []

    for i, (arg, v) in enumerate(zip(overload._schema.arguments, op.operation.operands)):
        found = devices(v) if schema_kind(arg) != "device" else []
        if found:
            raise PassError(f"{op_name(op).removeprefix('torch.')} operand {i} ({arg.name}) is the device "
                            f"constant {found[0]!r}: a program must not name a device (factory ops and copies "
                            "run on the device of the step's inputs)", op.location)


def _regs(xs: list) -> list[int]:
    out = []
    for x in xs:
        if isinstance(x, dict):
            if "r" in x:
                out.append(x["r"])
            elif "l" in x:
                out.extend(_regs(x["l"]))
    return out
