"""sp-plan-remat: split the partitioned joint step into @forward and @backward and choose what the
forward saves for the backward. Options: policy=none|full|sac|auto, budget=BYTES (for auto).

  none  save every forward value the backward reads
  full  save only what crosses a layer boundary (each layer's inputs); recompute the rest of the layer
  sac   sequence-aware: also keep attention outputs and softmax statistics (quadratic in S to
        recompute); recompute projections, norms and pointwise work (linear in S)
  auto  per value: the plan with the least recompute cost whose predicted peak fits budget=BYTES
        (passes/sp_plan_remat_auto.py), or an error naming the smallest peak and what dominates it
Collectives and random ops (dropout) are never recomputed: their results are always saved; so are
scalars (a loss's token count would otherwise recompute the whole chain below it, for 4 bytes).
Layers are read from the locations' module paths (`model.layers.3...` -> layer `model.layers.3`).

@forward(args...) -> (loss, saved...); @backward(args..., saved...) -> (grads...). A recomputed op
is cloned into @backward just before its first reader there, so each layer's activations are
rebuilt only when that layer's gradients run (and die after them), not all at once.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir
from torch_mlir.dialects import func as func_d

from . import sp_plan_remat_auto as auto
from .attributes import func_attr
from .base import Bytes, OptionError, Pass, PassError, option
from .ops import ATTENTION, COLLECTIVES, CONSTANT, HALO, LIST, RANDOM, RING_ATTENTION
from .sp_coalesce_collectives import CoalesceCollectives
from .sp_fuse import Fuse
from .sp_plan_memory import predict_funcs
from .torch_ir import ancestors, body_ops, func_of, is_tensor, location_module, op_name, shape, string_array, strings

POLICIES = ("none", "full", "sac", "auto")
_NEVER_RECOMPUTE = COLLECTIVES | {HALO, RING_ATTENTION} | RANDOM
_LAYER = re.compile(r"^(.*?\.\d+)(?:\.|$)")


def segment(op) -> str:
    """The layer an op belongs to: its module path up to the first numeric component ('' outside)."""
    m = _LAYER.match(location_module(op.location))
    return m.group(1) if m else ""


def _owner(v: ir.Value):
    o = v.owner
    return o.operation if isinstance(o, (ir.Operation, ir.OpView)) else None


def _is_scalar(v: ir.Value) -> bool:
    return is_tensor(v) and not shape(v)


def _is_constant(op) -> bool:
    name = op.name
    if name.startswith(CONSTANT):
        return True
    return name == LIST and all(
        _owner(x) is not None and _is_constant(_owner(x)) for x in op.operands)


class Split:
    """Which forward values the forward saves (`keep`) and which ops the backward recomputes.
    Under auto, `extra` are the values saved beyond what full must save."""

    def __init__(self, func, policy: str, extra=()):
        if policy not in POLICIES:
            raise PassError(f"unknown remat policy '{policy}'; use one of {', '.join(POLICIES)}", func.location)
        self.func, self.policy, self.extra = func, policy, set(extra)
        self.ops = [o for o in body_ops(func) if not _is_constant(o.operation) and o.operation.name != "func.return"]
        self.ret = next(o for o in body_ops(func) if o.operation.name == "func.return")
        self.forward = self._forward_ops()
        self._mandatory: dict[ir.Value, bool] = {}
        self._segment: dict = {}

    owner = staticmethod(_owner)

    def _forward_ops(self) -> set:
        """Ops the loss depends on."""
        return {op for op in ancestors(self.ret.operation.operands[0]) if not _is_constant(op)}

    def segment_of(self, op) -> str:
        if op not in self._segment:
            self._segment[op] = segment(op)
        return self._segment[op]

    def mandatory(self, v: ir.Value) -> bool:
        """Saved under every policy: collectives, random ops, scalars, values crossing a layer boundary."""
        if v not in self._mandatory:
            op = _owner(v)
            seg = self.segment_of(op)
            self._mandatory[v] = op_name(op) in _NEVER_RECOMPUTE or _is_scalar(v) or any(
                u.owner.operation in self.forward and self.segment_of(u.owner.operation) != seg for u in v.uses)
        return self._mandatory[v]

    def keep(self, v: ir.Value) -> bool:
        """Whether a forward value is saved rather than recomputed."""
        if self.policy == "none" or self.mandatory(v):
            return True
        if self.policy == "sac":
            return op_name(_owner(v)) in ATTENTION
        return v in self.extra

    def backward(self) -> list:
        return [o for o in self.ops if o.operation not in self.forward]

    def backward_reads(self) -> list[ir.Value]:
        """The values the backward ops and the returned gradients read."""
        return [x for op in self.backward() for x in op.operation.operands] + list(self.ret.operation.operands[1:])

    @functools.cached_property
    def plan(self) -> tuple[list, list, set, list[ir.Value]]:
        """(forward ops, backward ops, recomputed ops, saved values), ops in program order."""
        recompute: set = set()
        saved: dict[ir.Value, None] = {}

        def need(v: ir.Value) -> None:
            op = _owner(v)
            if op is None or op not in self.forward or op in recompute:
                return                      # an argument, a backward value, or already recomputed
            if self.keep(v):
                saved[v] = None
                return
            recompute.add(op)
            for x in op.operands:
                need(x)

        for x in self.backward_reads():   # incl. a gradient the forward already computed
            need(x)
        fwd = [o for o in self.ops if o.operation in self.forward]
        order = {o.operation: i for i, o in enumerate(self.ops)}
        return fwd, self.backward(), recompute, sorted(saved, key=lambda v: order[_owner(v)])

    @functools.cached_property
    def recompute_cost(self) -> tuple[int, int]:
        """(FLOPs, bytes) of what the backward recomputes (sp_plan_remat_auto's model)."""
        return auto.recompute_cost(self.plan[2])


def _clone_into(ops: list, mapping: dict, block_end, lazy: set = frozenset()):
    """Clone ops before block_end, remapping operands; the constants they read and the ops of `lazy`
    (recomputation) are cloned on demand, just before their first reader. Returns the resolver
    (old value -> value in the new function) for the terminator."""
    def value(v: ir.Value) -> ir.Value:
        if v in mapping:
            return mapping[v]
        op = _owner(v)
        if op is None or not (_is_constant(op) or op in lazy):
            raise PassError(f"internal: {v.get_name()} is not available in the new function",
                            op.location if op else None)
        clone_one(op)
        return mapping[v]

    def clone_one(op) -> None:
        operands = [value(x) for x in op.operands]
        new = op.clone(ip=block_end)
        for i, x in enumerate(operands):
            new.operands[i] = x
        for old, r in zip(op.results, new.results):
            mapping[old] = r

    for op in ops:
        clone_one(op.operation)
    return value


def _new_func(name: str, arg_types: list, result_types: list, ip: ir.InsertionPoint):
    f = func_d.FuncOp(name, (arg_types, result_types), ip=ip)
    f.add_entry_block()
    return f


def emit(module_op, func, split: Split) -> tuple:
    """@forward and @backward of this split, beside the joint step (which is left as it is)."""
    fwd_ops, bwd_ops, recompute, saved = split.plan
    block = func.regions[0].blocks[0]
    args = list(block.arguments)
    arg_types = [a.type for a in args]
    roles = strings(func_attr(func, "sp.args"))
    results = strings(func_attr(func, "sp.results"))
    ret_vals = list(split.ret.operation.operands)
    copied = {k: func.attributes[k] for k in ("sp.arg_layouts", "sp.seq_len") if k in func.attributes}
    with ir.InsertionPoint(module_op.regions[0].blocks[0]), func.location:
        fwd = _new_func("forward", arg_types, [ret_vals[0].type] + [v.type for v in saved], ir.InsertionPoint.current)
        bwd = _new_func("backward", arg_types + [v.type for v in saved], [v.type for v in ret_vals[1:]],
                        ir.InsertionPoint.current)
    for f, r, extra in ((fwd, ["loss"] + [f"saved:{i}" for i in range(len(saved))], []),
                        (bwd, results[1:], [f"saved:{i}" for i in range(len(saved))])):
        f.attributes["sp.args"] = string_array(roles + extra)
        f.attributes["sp.results"] = string_array(r)
        for k, v in copied.items():
            f.attributes[k] = v
    fwd.attributes["sp.remat"] = ir.StringAttr.get(split.policy)
    flops, moved = split.recompute_cost
    i64 = ir.IntegerType.get_signless(64)
    bwd.attributes["sp.recomputed"] = ir.DictAttr.get({      # for plan.json and `autospc inspect`
        "ops": ir.IntegerAttr.get(i64, len(recompute)), "flops": ir.IntegerAttr.get(i64, flops),
        "bytes": ir.IntegerAttr.get(i64, moved)})
    # forward: the ops the loss needs; returns the loss and what the backward reads
    fb = fwd.regions[0].blocks[0]
    fmap = dict(zip(args, fb.arguments))
    with func.location:
        end = ir.InsertionPoint(fb)
        value = _clone_into(fwd_ops, fmap, end)
        func_d.ReturnOp([value(ret_vals[0])] + [value(v) for v in saved], ip=end)
        # backward: recomputation, then the gradient ops
        bb = bwd.regions[0].blocks[0]
        bmap = dict(zip(args + saved, bb.arguments))
        end = ir.InsertionPoint(bb)
        value = _clone_into(bwd_ops, bmap, end, lazy=recompute)
        func_d.ReturnOp([value(v) for v in ret_vals[1:]], ip=end)
    return fwd, bwd


def _auto(module_op, func, limit: int, bucket: int, fuse: int) -> Split:
    """The budget planner's split; the plans it simulated go on the module as `sp.remat_auto`. Each
    candidate is measured as the pipeline leaves it: coalesced with `bucket` (0: not coalesced), fused
    by sp-fuse{min_ops=fuse} (0: not fused), whose kernels' intermediates never touch memory."""
    def measure(split: Split) -> dict:
        fwd, bwd = emit(module_op, func, split)
        kernels = []
        try:
            if bucket:
                for f in (fwd, bwd):
                    CoalesceCollectives(bucket=bucket).coalesce(f)
            if fuse:
                kernels = Fuse(min_ops=fuse).fuse(fwd) + Fuse(min_ops=fuse).fuse(bwd, fwd)
            return predict_funcs(fwd, bwd)
        finally:
            for f in (fwd, bwd, *kernels):
                f.erase()

    chosen, tried = auto.choose(lambda p, extra=(): Split(func, p, extra), measure, limit, func.location)
    i64 = ir.IntegerType.get_signless(64)

    def entry(t) -> ir.Attribute:
        return ir.DictAttr.get({"predicted_peak_bytes": ir.IntegerAttr.get(i64, t.peak),
                                "recompute_flops": ir.IntegerAttr.get(i64, t.recompute[0]),
                                "recompute_bytes": ir.IntegerAttr.get(i64, t.recompute[1]),
                                "recompute_ns": ir.IntegerAttr.get(i64, round(auto.seconds(t.recompute) * 1e9))})
    module_op.attributes["sp.remat_auto"] = ir.DictAttr.get({
        "budget_bytes": ir.IntegerAttr.get(i64, limit), "chosen": ir.StringAttr.get(chosen.name),
        "plans": ir.DictAttr.get({t.name: entry(t) for t in tried})})
    return chosen.split


@dataclass
class PlanRemat(Pass):
    """split the step into @forward/@backward; save or recompute per policy"""
    name: ClassVar[str] = "sp-plan-remat"
    policy: str = option("sac", "what the forward saves for the backward", choices=POLICIES)
    budget: Bytes | None = option(None, "policy=auto: the per-rank peak the plan must fit (e.g. 12GiB)", minimum=1)
    bucket: Bytes = option(0, "policy=auto: the bucket of the sp-coalesce-collectives that follows (0: none), "
                              "so each candidate's peak is the final one", minimum=0)
    fuse: int = option(0, "policy=auto: min_ops of the sp-fuse that follows (0: none), so each candidate's peak "
                          "is the final one", minimum=0)

    def validate(self) -> None:
        if self.policy == "auto" and self.budget is None:
            raise OptionError(f"{self.name}: policy=auto needs budget=BYTES (e.g. budget=12GiB)")

    def run(self, module_op) -> None:
        func = func_of(module_op)
        split = _auto(module_op, func, self.budget, self.bucket, self.fuse) if self.policy == "auto" \
            else Split(func, self.policy)
        emit(module_op, func, split)
        func.erase()
