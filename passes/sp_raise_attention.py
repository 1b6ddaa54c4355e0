"""sp-raise-attention: the captured attention ops become device-neutral `sp.attention` /
`sp.attention_grad`, with grouped-query attention made explicit as `kv_groups` and the document
positions of packed documents, when the step has them, as the last operand."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from autosp.dialects.sp import AttentionGradOp, AttentionOp
from .base import Pass, PassError
from .torch_ir import body_ops, const_value, funcs_of, op_name, shape

FORWARD = "torch.autosp.attention"
BACKWARD = "torch.autosp.attention_backward"


def _flags(op, causal: ir.Value, scale: ir.Value, window: ir.Value, q: ir.Value, k: ir.Value) -> tuple:
    ok_c, c = const_value(causal)
    ok_s, s = const_value(scale)
    ok_w, w = const_value(window)
    if not (ok_c and ok_s and ok_w):
        raise PassError("attention causal flag, scale and window must be constants", op.location)
    hq, hk = shape(q)[1], shape(k)[1]
    if hq % hk:
        raise PassError(f"{hq} query heads are not a multiple of {hk} key/value heads", op.location)
    i1, i64 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(64)
    return (ir.IntegerAttr.get(i1, int(bool(c))), ir.FloatAttr.get(ir.F64Type.get(), float(s)),
            ir.IntegerAttr.get(i64, hq // hk), ir.IntegerAttr.get(i64, int(w)))


def _doc_pos(rest: list[ir.Value]) -> ir.Value | None:
    """The document positions operand, absent or None when the attention has none."""
    if not rest or str(rest[0].type) == "!torch.none":
        return None
    return rest[0]


@dataclass
class RaiseAttention(Pass):
    """raise captured attention fwd/bwd to sp.attention / sp.attention_grad"""
    name: ClassVar[str] = "sp-raise-attention"

    def run(self, module_op) -> None:
        for op in (o for func in funcs_of(module_op) for o in body_ops(func)):
            name = op_name(op)
            if name not in (FORWARD, BACKWARD):
                continue
            x = list(op.operation.operands)
            types = [r.type for r in op.operation.results]
            first_flag = 3 if name == FORWARD else 6
            doc_pos = _doc_pos(x[first_flag + 3:])
            with ir.InsertionPoint(op), op.location:
                if name == FORWARD:
                    new = AttentionOp(x[0], x[1], x[2], *_flags(op, x[3], x[4], x[5], x[0], x[1]),
                                      out=types[0], lse=types[1], doc_pos=doc_pos)
                else:
                    new = AttentionGradOp(*x[:6], *_flags(op, x[6], x[7], x[8], x[1], x[2]),
                                          dq=types[0], dk=types[1], dv=types[2], doc_pos=doc_pos)
            for old, repl in zip(op.operation.results, new.operation.results):
                old.replace_all_uses_with(repl)
            op.operation.erase()
