"""sp-elide-halo: a shift of a replicated value is computed whole on every rank, then sharded: no exchange.

sp-partition-sequence turns a shift along the sequence (the labels' `pad + slice` of a causal LM loss)
into `sp.halo` over the local shard: each rank receives the first elements of the next shard. When
that shard is `sp.shard_slice` of a replicated value (the labels, an input every rank holds whole),
the elements a rank would receive are already on it:

    %s = sp.shard_slice(%x) {dim = d}            %t = aten.slice.Tensor(%x, d, w, INT64_MAX, 1)
    %h = sp.halo(%s) {dim = d, width = w,   ->   %p = aten.constant_pad_nd(%t, [0, .., 0, w], fill)
                      fill = f}                  %h = sp.shard_slice(%p) {dim = d}

Both are the shift of the whole sequence cut to this rank's shard in the mesh's sequence order
(sp.halo's definition), so the result is identical; the step loses one collective (a rendezvous of
every rank: on CPU ranks a gloo round trip of ~1 ms, on GPUs an NCCL launch) for a slice and a pad of
an integer [batch, seq] tensor. Runs after sp-pad-sequence, which reads the halos to check that only
the labels are shifted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from autosp.dialects.sp import ShardSliceOp
from .base import Pass
from .ops import SHARD_SLICE
from .sp_propagate_sequence import INT64_MAX
from .tiling import Builder
from .torch_ir import body_ops, const_float, funcs_of, int_attr, op_name, shape, with_shape


def _group(op) -> str:
    return ir.StringAttr(op.operation.attributes["group"]).value


@dataclass
class ElideHalo(Pass):
    """shift a sharded replicated value (the labels) on every rank, without the sp.halo exchange"""
    name: ClassVar[str] = "sp-elide-halo"

    def run(self, module_op) -> None:
        for func in funcs_of(module_op):
            for op in body_ops(func):
                if op_name(op) == "sp.halo":
                    self.elide(op)

    def elide(self, halo) -> None:
        sliced = halo.operation.operands[0].owner
        if not isinstance(sliced, (ir.Operation, ir.OpView)) or op_name(sliced) != SHARD_SLICE:
            return
        dim, width = int_attr(halo, "dim"), int_attr(halo, "width")
        if int_attr(sliced, "dim") != dim or _group(sliced) != _group(halo):
            return
        x = sliced.operation.operands[0]
        whole = shape(x)
        pad = [0] * (2 * (len(whole) - dim))   # constant_pad_nd counts (before, after) pairs from the last dim
        pad[-1] = width
        b = Builder()
        fill = ir.FloatAttr(halo.operation.attributes["fill"]).value
        with ir.InsertionPoint(halo.operation), halo.location:
            rest = b.emit(halo.operation, "slice.Tensor",
                          [x, b.const(halo.operation, dim), b.const(halo.operation, width),
                           b.const(halo.operation, INT64_MAX), b.const(halo.operation, 1)],
                          [with_shape(x.type, [n - width if i == dim else n for i, n in enumerate(whole)])])
            value = const_float(fill)
            shifted = b.emit(halo.operation, "constant_pad_nd",
                             [rest.results[0], b.int_list(halo.operation, pad), value], [x.type])
            out = ShardSliceOp(shifted.results[0], sliced.operation.attributes["dim"],
                               sliced.operation.attributes["group"], out=halo.operation.results[0].type).out
        b.check()
        halo.operation.results[0].replace_all_uses_with(out)
        halo.operation.erase()
        if not list(sliced.operation.results[0].uses):
            sliced.operation.erase()
