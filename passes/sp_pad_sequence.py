"""sp-pad-sequence: a step for `length` tokens, from one captured (and partitioned) at a longer length.

When sp does not divide the sequence length S, autosp.compile captures the step at S' > S (a multiple
of 2 x sp, so that the ring's zigzag chunks fit too). This pass, run right after
sp-partition-sequence, gives the token inputs back their length S and pads them at the top of the
step: input ids with 0, labels with -100 (cross-entropy's ignore_index). The result is exact, the
loss and every gradient those of the S unpadded tokens, because the padded positions come last and:

- every attention is causal: no real position attends to a later, padded one;
- their labels are -100, which every loss (nll_loss_forward) ignores: they count for nothing in
  the token-weighted mean, and their gradient is exactly zero, so nothing flows back from them into
  the weights (the backward is linear in that gradient; causal attention sends none of it to a
  real position);
- the label shift's halo reads the padded labels (-100), which is what the unpadded step shifts in.

The pass checks each of these on the partitioned step and refuses a step where one fails (a
non-causal attention, a loss other than cross-entropy with ignore_index -100, a reduction over the
sequence feeding the loss, a shift of anything but the labels), naming the op's source line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from .attributes import func_attr
from .base import Pass, PassError, option
from .ops import A, IDENTITY, SHARD_SLICE
from .torch_ir import ancestors, aten, body_ops, const_int, const_value, func_of, int_list_value, op_name, shape, strings, \
    with_shape

IGNORE_INDEX = -100   # cross_entropy's default ignore_index: the label of a padded position
ATTENTIONS = ("sp.attention", "sp.ring_attention")
LOSS = A + "nll_loss_forward"


@dataclass
class PadSequence(Pass):
    """take `length` tokens per sequence, padded at the end to the captured length inside the step"""
    name: ClassVar[str] = "sp-pad-sequence"
    length: int = option(0, "the sequence length the step takes (0: the captured length, no padding)", minimum=0)

    def run(self, module_op) -> None:
        func = func_of(module_op)
        block = func.regions[0].blocks[0]
        roles = strings(func_attr(func, "sp.args"))
        inputs = [(role[len("input:"):], a) for role, a in zip(roles, block.arguments) if role.startswith("input:")]
        captured = shape(inputs[0][1])[1]
        if self.length in (0, captured):
            return
        if self.length > captured:
            raise PassError(f"length={self.length} is longer than the captured sequence ({captured} "
                            "tokens); it can only pad", func.location)
        self.check(func, dict(inputs), captured)
        with ir.InsertionPoint.at_block_begin(block), func.location:
            for name, arg in inputs:
                arg.set_type(with_shape(arg.type, [shape(arg)[0], self.length]))
                fill = const_int(IGNORE_INDEX if name == "labels" else 0)
                padded = aten("constant_pad_nd", [arg, int_list_value([0, captured - self.length]), fill],
                              [with_shape(arg.type, [shape(arg)[0], captured])]).results[0]
                arg.replace_all_uses_except(padded, padded.owner.operation)
        ftype = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)
        func.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in block.arguments], ftype.results))

    def refuse(self, what: str, captured: int, op) -> PassError:
        return PassError(f"{self.length} tokens are padded to {captured} for equal shards, which is "
                         f"exact only if {what}; use a length divisible by sp", op.location)

    def check(self, func, inputs: dict[str, ir.Value], captured: int) -> None:
        """Refuse a step that the padded positions would change (see the module docstring)."""
        ops = body_ops(func)
        for op in ops:
            name = op_name(op)
            if name in ATTENTIONS and not ir.IntegerAttr(op.operation.attributes["causal"]).value:
                raise self.refuse("every attention is causal (this one is not)", captured, op)
            if name == LOSS and const_value(op.operation.operands[4])[1] != IGNORE_INDEX:
                raise self.refuse(f"the loss ignores label {IGNORE_INDEX} (this one ignores "
                                  f"{const_value(op.operation.operands[4])[1]})", captured, op)
            if name == "sp.halo" and _source(op.operation.operands[0]) != inputs.get("labels"):
                raise self.refuse("only the labels are shifted along the sequence (this shifts another value)",
                                  captured, op)
        if "labels" not in inputs or not any(op_name(op) == LOSS for op in ops):
            raise self.refuse(f"the loss is cross-entropy over the labels with ignore_index {IGNORE_INDEX}",
                              captured, func)
        ret = next(op for op in ops if op_name(op) == "func.return")
        for op in ancestors(ret.operation.operands[strings(func_attr(func, "sp.results")).index("loss")]):
            if op_name(op) != "sp.all_reduce":
                continue
            partial = op.operands[0].owner   # where the partial sum is made
            if op_name(partial) != LOSS:
                raise self.refuse("nothing but the loss sums over the sequence (this sum feeds the loss)",
                                  captured, partial)


def _source(v: ir.Value) -> ir.Value:
    """v before this rank's slice and identities."""
    while isinstance(v.owner, (ir.Operation, ir.OpView)) and op_name(v.owner) in IDENTITY | {SHARD_SLICE}:
        v = v.owner.operation.operands[0]
    return v

