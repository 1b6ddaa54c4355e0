"""torch-dialect ops as calls of ATen overloads: name resolution and schema-typed operands.

Shared by the partition pass (which checks its local shapes by running each op on meta tensors)
and the host-program translation (which encodes the same calls for the runtime)."""
from __future__ import annotations

import re
from typing import Any, Callable

import torch
from torch_mlir import ir

from autosp.runtime.artifact import resolve
from .ops import LIST
from .torch_ir import const_value, dtype_str, is_tensor, op_name, shape

# torch ScalarType codes as torch-mlir prints them
SCALAR_TYPES = {0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64,
                5: torch.float16, 6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16}
MEMORY_FORMATS = {0: torch.contiguous_format, 1: torch.preserve_format, 2: torch.channels_last}
ELEMENT_TYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64,
                 "si64": torch.int64, "si32": torch.int32, "si16": torch.int16, "si8": torch.int8,
                 "ui8": torch.uint8, "i1": torch.bool}


def overload_name(name: str) -> str | None:
    """'torch.aten.sum.dim_IntList' -> 'aten.sum.dim_IntList'; 'torch.aten.neg' -> 'aten.neg.default'."""
    parts = name.split(".")
    if len(parts) not in (3, 4) or parts[0] != "torch" or parts[1] not in ("aten", "prims"):
        return None
    return ".".join(parts[1:3] + [parts[3] if len(parts) == 4 else "default"])


def schema_kind(arg: torch._C.Argument) -> str:
    """How a schema argument's value is encoded: dtype, memory_format, device, layout or plain.
    `real_type` is the declared type (`arg.type` reports ScalarType, Layout, MemoryFormat as int)."""
    t = re.sub(r"^Optional\[(.*)\]$", r"\1", str(arg.real_type))
    return {"ScalarType": "dtype", "MemoryFormat": "memory_format", "Device": "device",
            "Layout": "layout"}.get(t, "plain")


def convert(kind: str, value: Any) -> Any:
    """A constant operand as the Python value an OpOverload accepts."""
    if value is None or kind == "plain":
        return value
    if kind == "dtype":
        return SCALAR_TYPES[value]
    if kind == "memory_format":
        return MEMORY_FORMATS[value]
    if kind == "layout":
        return torch.strided
    return torch.device(value)


def decode(op, leaf: Callable[[ir.Value], Any]) -> tuple[torch._ops.OpOverload, list, dict]:
    """(overload, args, kwargs) for a torch-dialect ATen op; non-constant values become leaf(value)."""
    qualified = overload_name(op_name(op))
    if qualified is None:
        raise KeyError(op_name(op))
    overload = resolve(qualified)
    args, kwargs = [], {}
    for arg, v in zip(overload._schema.arguments, op.operation.operands):
        val = decode_value(v, leaf, schema_kind(arg))
        (kwargs.__setitem__(arg.name, val) if arg.kwarg_only else args.append(val))
    return overload, args, kwargs


def decode_value(v: ir.Value, leaf: Callable[[ir.Value], Any], kind: str = "plain") -> Any:
    ok, val = const_value(v)
    if ok:
        return convert(kind, val)
    owner = v.owner
    if isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.name == LIST:
        return [decode_value(x, leaf) for x in owner.operation.operands]
    return leaf(v)


def meta_tensor(v: ir.Value) -> torch.Tensor:
    return torch.empty(shape(v), dtype=ELEMENT_TYPES[dtype_str(v.type)], device="meta")


def meta_shapes(op) -> list[list[int]] | None:
    """Result shapes of an ATen op run on meta tensors of its operands' current types."""
    def leaf(v: ir.Value):
        if is_tensor(v):
            return meta_tensor(v)
        raise KeyError("non-constant scalar operand")
    try:
        overload, args, kwargs = decode(op, leaf)
    except KeyError:
        return None
    on_meta = lambda a: "meta" if isinstance(a, torch.device) else a  # noqa: E731
    out = overload(*[on_meta(a) for a in args], **{k: on_meta(a) for k, a in kwargs.items()})
    outs = out if isinstance(out, (tuple, list)) else [out]
    return [list(t.shape) for t in outs if isinstance(t, torch.Tensor)]
