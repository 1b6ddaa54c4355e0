"""The `sp` dialect: sequence-parallel attention and collectives (Python-defined, IRDL-backed).

Ops print in generic form. Operands are usually `!torch.vtensor`. Verifiers run before the IRDL
constraint checks, so they read attributes defensively and leave type errors to IRDL.
"""

import re
from typing import Any

from torch_mlir import ir
from torch_mlir.dialects.ext import Dialect, DialectAlreadyLoadedError, Operand, Pure, Result

GROUPS = ("sp", "dp", "world", "ulysses", "ring")   # ulysses x ring = sp
REDUCE_OPS = ("sum", "avg", "max")
_VT = re.compile(r"!torch\.vtensor<\[([^\]]*)\],([^>]+)>")


class SP(Dialect, name="sp"):
    pass


def load(context: ir.Context | None = None) -> None:
    """Load the dialect into the current context (once; a second load is a no-op)."""
    try:
        SP.load()
    except DialectAlreadyLoadedError:
        pass


def vtensor_shape(t: ir.Type) -> list[int] | None:
    """Static shape of a `!torch.vtensor` (-1 for unknown dims); None for other types."""
    m = _VT.fullmatch(str(t))
    if not m:
        return None
    return [int(d) if d not in ("?", "") else -1 for d in m.group(1).split(",")] if m.group(1) else []


def _attr(op, name: str):
    return op.attributes[name] if name in op.attributes else None


def _int(op, name: str) -> int | None:
    a = _attr(op, name)
    return ir.IntegerAttr(a).value if isinstance(a, ir.IntegerAttr) else None


def _flag(op, name: str) -> bool | None:
    """An i1 attribute (true / false print as BoolAttr)."""
    a = _attr(op, name)
    if isinstance(a, ir.BoolAttr):
        return ir.BoolAttr(a).value
    return bool(ir.IntegerAttr(a).value) if isinstance(a, ir.IntegerAttr) else None


def _str(op, name: str) -> str | None:
    a = _attr(op, name)
    return ir.StringAttr(a).value if isinstance(a, ir.StringAttr) else None


def _arity(op, operands: int | tuple[int, ...], results: int) -> bool:
    """Whether the op has the counts the verifier indexes; if not, IRDL reports them after us."""
    counts = operands if isinstance(operands, tuple) else (operands,)
    return len(op.operation.operands) in counts and len(op.operation.results) == results


def _fail(op, msg: str) -> bool:
    op.location.emit_error(f"'{op.operation.name}' op {msg}")
    return False


def _check_group(op) -> bool:
    g = _str(op, "group")
    if g is not None and g not in GROUPS:
        return _fail(op, f"group must be one of {', '.join(GROUPS)}, got '{g}'")
    return True


def _check_dim(op, name: str, rank: int | None) -> bool:
    d = _int(op, name)
    if d is not None and rank is not None and not 0 <= d < rank:
        return _fail(op, f"{name} = {d} is out of range for a rank-{rank} operand")
    return True


def _rank(v: ir.Value) -> int | None:
    s = vtensor_shape(v.type)
    return None if s is None else len(s)


def _same_rank(op, src: ir.Value, dst: ir.Value) -> bool:
    a, b = _rank(src), _rank(dst)
    if a is not None and b is not None and a != b:
        return _fail(op, f"result rank {b} differs from operand rank {a}")
    return True


class AttentionOp(SP.Operation, name="attention", traits=[Pure]):
    """Exact attention over [B, H, S, D]; `lse` [B, H, S] is the softmax statistics for the backward.
    K/V may have H / kv_groups heads (grouped-query attention)."""
    q: Operand[Any]
    k: Operand[Any]
    v: Operand[Any]
    causal: ir.IntegerAttr   # i1
    scale: ir.FloatAttr
    kv_groups: ir.IntegerAttr
    window: ir.IntegerAttr   # i64: each query attends to the `window` positions up to its own; 0: no window
    out: Result[Any]
    lse: Result[Any]
    # [B, S] i64, each query's position in its document, which it attends no further back than (packed
    # documents, padding); keyword-only and last, as an optional field must be
    doc_pos: Operand[Any] | None = None

    def verify_invariants(self) -> bool:
        if not _arity(self, (3, 4), 2):
            return True
        return _verify_attention(self, *self.operation.operands)


class AttentionGradOp(SP.Operation, name="attention_grad", traits=[Pure]):
    """Gradient of sp.attention: (dout, q, k, v, out, lse) -> (dq, dk, dv)."""
    dout: Operand[Any]
    q: Operand[Any]
    k: Operand[Any]
    v: Operand[Any]
    out: Operand[Any]
    lse: Operand[Any]
    causal: ir.IntegerAttr
    scale: ir.FloatAttr
    kv_groups: ir.IntegerAttr
    window: ir.IntegerAttr
    dq: Result[Any]
    dk: Result[Any]
    dv: Result[Any]
    # [B, S] i64, each query's position in its document, which it attends no further back than (packed
    # documents, padding); keyword-only and last, as an optional field must be
    doc_pos: Operand[Any] | None = None

    def verify_invariants(self) -> bool:
        return _verify_attention_grad(self)


class RingAttentionOp(SP.Operation, name="ring_attention", traits=[Pure]):
    """sp.attention over a sequence sharded across `group`: q, k, v are this rank's block of
    [B, H, S, D] (contiguous, in rank order); the K/V blocks travel around the ring at KV-head
    width and each block's output is merged by its softmax statistics. `lse` [B, H, S/P] (fp32)
    is exact, for the backward."""
    q: Operand[Any]
    k: Operand[Any]
    v: Operand[Any]
    causal: ir.IntegerAttr   # i1
    scale: ir.FloatAttr
    kv_groups: ir.IntegerAttr
    window: ir.IntegerAttr
    group: ir.StringAttr
    out: Result[Any]
    lse: Result[Any]
    # [B, S] i64, each query's position in its document, which it attends no further back than (packed
    # documents, padding); keyword-only and last, as an optional field must be
    doc_pos: Operand[Any] | None = None

    def verify_invariants(self) -> bool:
        if not _arity(self, (3, 4), 2):
            return True
        return _check_group(self) and _verify_attention(self, *self.operation.operands)


class RingAttentionGradOp(SP.Operation, name="ring_attention_grad", traits=[Pure]):
    """Gradient of sp.ring_attention: (dout, q, k, v, out, lse) -> (dq, dk, dv), each rank's block;
    dk / dv accumulate as they travel the ring back to the rank that holds their block."""
    dout: Operand[Any]
    q: Operand[Any]
    k: Operand[Any]
    v: Operand[Any]
    out: Operand[Any]
    lse: Operand[Any]
    causal: ir.IntegerAttr
    scale: ir.FloatAttr
    kv_groups: ir.IntegerAttr
    window: ir.IntegerAttr
    group: ir.StringAttr
    dq: Result[Any]
    dk: Result[Any]
    dv: Result[Any]
    # [B, S] i64, each query's position in its document, which it attends no further back than (packed
    # documents, padding); keyword-only and last, as an optional field must be
    doc_pos: Operand[Any] | None = None

    def verify_invariants(self) -> bool:
        return _check_group(self) and _verify_attention_grad(self)


def _without_segment_sizes(cls: type) -> None:
    """The builder of an op with an optional operand records operandSegmentSizes; with one optional
    operand, last, the count says it, so the attribute only clutters the IR: dropped."""
    build = cls.__init__

    def __init__(self, *args, **kwargs):
        build(self, *args, **kwargs)
        if "operandSegmentSizes" in self.operation.attributes:
            del self.operation.attributes["operandSegmentSizes"]
    cls.__init__ = __init__


for _attention_op in (AttentionOp, AttentionGradOp, RingAttentionOp, RingAttentionGradOp):
    _without_segment_sizes(_attention_op)


def _verify_attention_grad(op) -> bool:
    if not _arity(op, (6, 7), 3):
        return True
    ops = op.operation.operands
    if not _verify_attention(op, ops[1], ops[2], ops[3], *ops[6:]):
        return False
    for grad, primal in zip(op.operation.results, (ops[1], ops[2], ops[3])):
        gs, ps = vtensor_shape(grad.type), vtensor_shape(primal.type)
        if gs is not None and ps is not None and gs != ps:
            return _fail(op, f"gradient shape {gs} differs from its operand's shape {ps}")
    return True


def _verify_attention(op, q: ir.Value, k: ir.Value, v: ir.Value, doc_pos: ir.Value | None = None) -> bool:
    qs, ks, vs = (vtensor_shape(x.type) for x in (q, k, v))
    groups = _int(op, "kv_groups")
    scale = _attr(op, "scale")
    if isinstance(scale, ir.FloatAttr) and not ir.FloatAttr(scale).value > 0:
        return _fail(op, f"scale must be positive, got {ir.FloatAttr(scale).value}")
    if groups is not None and groups < 1:
        return _fail(op, f"kv_groups must be >= 1, got {groups}")
    window = _int(op, "window")
    if window is not None and window < 0:
        return _fail(op, f"window must be >= 0 (0: none), got {window}")
    if window and _flag(op, "causal") is False:
        return _fail(op, f"a window ({window}) needs causal attention")
    if qs is None or ks is None or vs is None:
        return True
    if not len(qs) == len(ks) == len(vs) == 4:
        return _fail(op, f"expects rank-4 [batch, heads, seq, head_dim] operands, got ranks "
                         f"{len(qs)}, {len(ks)}, {len(vs)}")
    if ks != vs:
        return _fail(op, f"key shape {ks} differs from value shape {vs}")
    if groups is not None and qs[1] != ks[1] * groups:
        return _fail(op, f"{qs[1]} query heads != {ks[1]} key/value heads x kv_groups {groups}")
    if qs[3] != ks[3] or qs[0] != ks[0]:
        return _fail(op, f"query shape {qs} and key shape {ks} disagree on batch or head_dim")
    if doc_pos is not None:
        if _flag(op, "causal") is False:
            return _fail(op, "document positions need causal attention")
        ds = vtensor_shape(doc_pos.type)
        if ds is not None and ds != [qs[0], qs[2]]:
            return _fail(op, f"document positions {ds} must be [batch, seq] of the queries {qs}")
        if ds is not None and not str(doc_pos.type).endswith(",si64>"):
            return _fail(op, f"document positions must be si64, got {doc_pos.type}")
    return True


def _verify_collective(op, dims: tuple[str, ...] = (), same_type: bool = False) -> bool:
    """Rules shared by single-operand collectives: group name, rank, dims in range."""
    if not _arity(op, 1, 1):
        return True
    src, dst = op.operation.operands[0], op.operation.results[0]
    if not _check_group(op) or not _same_rank(op, src, dst):
        return False
    if not all(_check_dim(op, d, _rank(src)) for d in dims):
        return False
    if same_type and str(src.type) != str(dst.type):
        return _fail(op, "result type must equal the operand type")
    return True


class AllToAllOp(SP.Operation, name="all_to_all", traits=[Pure]):
    """Ulysses re-shard: split `scatter_dim` across the group, concatenate along `gather_dim`."""
    input: Operand[Any]
    scatter_dim: ir.IntegerAttr
    gather_dim: ir.IntegerAttr
    group: ir.StringAttr
    out: Result[Any]

    def verify_invariants(self) -> bool:
        s, g = _int(self, "scatter_dim"), _int(self, "gather_dim")
        if s is not None and s == g:
            return _fail(self, "scatter_dim must differ from gather_dim")
        return _verify_collective(self, ("scatter_dim", "gather_dim"))


class AllReduceOp(SP.Operation, name="all_reduce", traits=[Pure]):
    input: Operand[Any]
    op: ir.StringAttr
    group: ir.StringAttr
    out: Result[Any]

    def verify_invariants(self) -> bool:
        kind = _str(self, "op")
        if kind is not None and kind not in REDUCE_OPS:
            return _fail(self, f"op must be one of {', '.join(REDUCE_OPS)}, got '{kind}'")
        return _verify_collective(self, same_type=True)


class AllGatherOp(SP.Operation, name="all_gather", traits=[Pure]):
    input: Operand[Any]
    dim: ir.IntegerAttr
    group: ir.StringAttr
    out: Result[Any]

    def verify_invariants(self) -> bool:
        return _verify_collective(self, ("dim",))


class ReduceScatterOp(SP.Operation, name="reduce_scatter", traits=[Pure]):
    input: Operand[Any]
    dim: ir.IntegerAttr
    group: ir.StringAttr
    out: Result[Any]

    def verify_invariants(self) -> bool:
        return _verify_collective(self, ("dim",))


class ShardSliceOp(SP.Operation, name="shard_slice", traits=[Pure]):
    """This rank's block of a replicated value along `dim` (no communication)."""
    input: Operand[Any]
    dim: ir.IntegerAttr
    group: ir.StringAttr
    out: Result[Any]

    def verify_invariants(self) -> bool:
        return _verify_collective(self, ("dim",))


class HaloOp(SP.Operation, name="halo", traits=[Pure]):
    """Shift a sharded value left by `width` along `dim`: each rank receives the first `width`
    elements of the next rank's shard; the last rank fills with `fill` (e.g. a label shift)."""
    input: Operand[Any]
    dim: ir.IntegerAttr
    width: ir.IntegerAttr
    fill: ir.FloatAttr
    group: ir.StringAttr
    out: Result[Any]

    def verify_invariants(self) -> bool:
        w = _int(self, "width")
        if w is not None and w < 1:
            return _fail(self, f"width must be >= 1, got {w}")
        return _verify_collective(self, ("dim",), same_type=True)
