"""sp-plan-memory: buffer lifetimes in program order and the predicted per-rank peak of one step.

Simulates @forward then @backward (after sp-plan-remat) the way the runtime executes them: every
value is freed after its last reader (the host program's free lists), views share their input's
storage (a storage dies with its last view), a view of a non-contiguous value copies. Writes on the
module `sp.memory`: predicted_peak_bytes and its breakdown
  parameters   parameters and buffers, resident
  inputs       the step's token inputs
  gradients    the gradients produced so far (at a backward peak)
  saved        the saved values live at the peak: not yet freed (backward) or made so far (forward)
  transient    the rest of the working set at the peak (an attention kernel's workspace included)
  comm         collective staging buffers (send chunks / receive list) at the peak
and on each function `sp.live_peak_bytes` and `sp.live_timeline` (live bytes after every op).
An sp.all_reduce or a kernel (sp-fuse's) whose operand's storage dies at it, held by no other value,
writes its result into that storage when the shapes and dtypes agree: the plan counts no new buffer
and marks the op `sp.in_place` (per result, the operand it is written into, or -1), which the
runtime follows: a gradient's reduction does not hold the gradient twice, the LM head's chunked
weight gradient accumulates into one sum. sp-plan-memory{budget=BYTES} fails when the prediction
exceeds the budget, naming the breakdown.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from autosp.runtime import kernels
from autosp.units import human

from .aten_call import ELEMENT_TYPES
from .attributes import func_attr
from .base import Bytes, Pass, PassError, option
from .ops import A, COLLECTIVE_STAGING, LIST, RESHAPE, RING_ATTENTION, RING_ATTENTION_GRAD, SAME_DTYPE_VIEWS, \
    STRIDED, VIEWS
from .torch_ir import body_ops, const_value, dtype_str, funcs_of, int_attr, is_free, is_tensor, op_name, shape, strings



def _reads(op) -> list[ir.Value]:
    """The values an op reads: a list operand (prim.ListConstruct, not simulated) is its elements,
    so e.g. the halves a rotary cat concatenates die at the cat."""
    out = []
    for x in op.operation.operands:
        owner = x.owner if isinstance(x, ir.OpResult) else None
        if owner is not None and op_name(owner) == LIST:
            out.extend(owner.operands)
        else:
            out.append(x)
    return out


def last_reads(ops: list) -> dict[ir.Value, int]:
    """The index in `ops` of each value's last reader (a list's elements are read by its reader)."""
    return {x: i for i, op in enumerate(ops) for x in _reads(op)}


def _strided_split(op) -> bool:
    """A split along a dim with a non-unit dim before it: its pieces are not contiguous."""
    if op_name(op) not in (A + "split.Tensor", A + "split_with_sizes", A + "unbind.int"):
        return False
    x, dim = op.operation.operands[0], op.operation.operands[-1]
    ok, d = const_value(dim)
    return not ok or any(n > 1 for n in shape(x)[:d % len(shape(x))])


def _splits_only(before: list[int], after: list[int]) -> bool:
    """`after` is `before` with each dim cut into consecutive factors (dims of 1 aside)."""
    a = [n for n in after if n != 1]
    j = 0
    for n in (n for n in before if n != 1):
        prod = 1
        while prod < n and j < len(a):
            prod *= a[j]
            j += 1
        if prod != n:
            return False
    return j == len(a)


def nbytes(v: ir.Value) -> int:
    return math.prod(shape(v)) * ELEMENT_TYPES[dtype_str(v.type)].itemsize if is_tensor(v) else 0


LOCAL_ATTENTION, LOCAL_ATTENTION_GRAD = "sp.attention", "sp.attention_grad"
IN_PLACE = ("sp.all_reduce", "func.call")   # may write a result into a dying operand (func.call: a kernel)
ATTENTIONS = (LOCAL_ATTENTION, LOCAL_ATTENTION_GRAD, RING_ATTENTION, RING_ATTENTION_GRAD)


def _qkv(op, name: str) -> list[ir.Value]:
    x = list(op.operation.operands)
    return x[:3] if name in (LOCAL_ATTENTION, RING_ATTENTION) else x[1:4]


def _staging(op, name: str) -> int:
    """Bytes a collective holds beside its operands and results while it runs."""
    if name in (RING_ATTENTION, RING_ATTENTION_GRAD):
        q, k, v = _qkv(op, name)
        kv = nbytes(k) + nbytes(v)
        f32 = 4 * math.prod(shape(q))   # an fp32 tensor of q's elements (out has q's shape)
        if name == RING_ATTENTION:   # the arriving K/V block, the fp32 output, a block's output, its merge
            return 2 * kv + 4 * f32
        kv32 = 4 * (math.prod(shape(k)) + math.prod(shape(v)))
        # arriving K/V, fp32 dq, the travelling fp32 dk/dv (held, summed, arriving), a block's grads
        return 2 * kv + f32 + 3 * kv32 + nbytes(q) + kv
    return COLLECTIVE_STAGING.get(name, 0) * sum(nbytes(r) for r in op.operation.results)


def _workspace(op, name: str) -> int:
    """What an attention kernel (one ring block's, for ring attention) holds beside its operands and
    results, as CUDA's kernels do (runtime/kernels.py): the GPU is what the plan predicts for."""
    if name not in ATTENTIONS:
        return 0
    q, k, _ = _qkv(op, name)
    (b, heads, rows, d), kv_heads = shape(q), shape(k)[1]
    itemsize = ELEMENT_TYPES[dtype_str(q.type)].itemsize
    causal, window = bool(int_attr(op, "causal")), int_attr(op, "window")
    docs = len(op.operation.operands) in (4, 7)   # the optional document positions, last
    ring = name in (RING_ATTENTION, RING_ATTENTION_GRAD)
    flash = kernels.op_flash(itemsize == 2, d, rows, causal, window, docs, ring)
    return kernels.workspace_bytes(b, heads, kv_heads, rows, rows, d, itemsize, flash,
                                   name in (LOCAL_ATTENTION_GRAD, RING_ATTENTION_GRAD), docs, window)


def _stacks(op, params: set) -> bool:
    """cat(W_i, 0) of parameters alone (sp-merge-projections; runtime/packing.py)."""
    if op_name(op) != A + "cat":
        return False
    lst = op.operation.operands[0].owner
    return const_value(op.operation.operands[1]) == (True, 0) and isinstance(lst, (ir.Operation, ir.OpView)) \
        and op_name(lst) == LIST and len(lst.operands) > 1 and all(e in params for e in lst.operands)


class Simulation:
    """Live bytes over one function's execution. Arguments are the caller's, except those in
    `owned` (argument index -> storage id, bytes), which are live from the start and freed after
    their last reader like any value: the saved values of the forward, with their sharing."""

    def __init__(self, func, owned: dict[int, tuple[int, int]] | None = None):
        self.func = func
        self.owned = owned or {}
        self.ops = [o for o in body_ops(func) if not is_free(o)]
        self.moments: list[int] = []   # after run: the live bytes at each op's peak moment (tick 4i+2)
        self.in_place: dict = {}       # after run: operation -> per result, the operand written into (-1: none)

    def run(self) -> tuple[int, dict[str, int], list[int], list[tuple[int, int]]]:
        """(peak working-set bytes; at that peak, the bytes of comm staging, of owned arguments
        still live ("owned") and of the returned values made so far ("returned", the loss aside);
        live bytes after every op; (storage id, bytes) of every returned value).
        Time runs 4 ticks per op i: results born at 4i, unread ones freed at 4i+1, the peak taken at
        4i+2, operands read for the last time freed at 4i+3; arguments are born before the start."""
        block = self.func.regions[0].blocks[0]
        roles = strings(func_attr(self.func, "sp.args")) if "sp.args" in self.func.attributes else []
        params = {a for r, a in zip(roles, block.arguments) if r.startswith("param:")}
        returned = {v for o in self.ops if op_name(o) == "func.return" for v in o.operation.operands}
        last = last_reads(self.ops)
        storage: dict[ir.Value, int] = {}    # value -> storage id
        strided: set[ir.Value] = set()
        members: dict[int, int] = {}          # storage id -> live values
        size: dict[int, int] = {}
        born: dict[int, int] = {}             # storage id -> tick made
        died: dict[int, int] = {}             # storage id -> tick freed
        live = peak = peak_comm = 0
        peak_tick = -2

        def release(v: ir.Value, tick: int) -> int:
            sid = storage[v]
            members[sid] -= 1
            if members[sid]:
                return 0
            died[sid] = tick
            return size[sid]

        for i, a in enumerate(block.arguments):
            if i in self.owned:
                sid, n = self.owned[i]
                sid = -2 - sid                 # keep the caller's sharing, apart from our own ids
                if sid not in size:
                    size[sid], born[sid] = n, -4
                    live += n
                storage[a] = sid
                members[sid] = members.get(sid, 0) + 1
            else:
                storage[a] = -1                # the caller's (parameters, buffers, inputs)
        peak = live
        timeline = []
        for i, op in enumerate(self.ops):
            name = op_name(op)
            if name == "func.return":
                break
            x = list(op.operation.operands)
            staging, work = _staging(op, name), _workspace(op, name)
            if _stacks(op, params):   # the runtime keeps these parameters side by side: a view of them
                storage[op.operation.results[0]] = -1
                self.moments.append(live + staging + work)
                timeline.append(live)
                continue
            for j, r in enumerate(op.operation.results):
                # a reshape of a non-contiguous value copies, unless it only splits dims: a view whatever the
                # strides (t(x) viewed [D, B, S]; a stacked projection's piece viewed [1, T, F])
                copies = name in RESHAPE and x[0] in strided and not _splits_only(shape(x[0]), shape(r))
                aliases = name in VIEWS or (name in SAME_DTYPE_VIEWS and dtype_str(r.type) == dtype_str(x[0].type))
                # an operand whose storage dies here, held by no other value, of r's shape and dtype
                donor = None if name not in IN_PLACE else next(
                    (k for k, v in enumerate(x) if is_tensor(v) and v not in strided and v not in returned
                     and last.get(v) == i and storage.get(v, -1) >= 0 and members[storage[v]] == 1
                     and shape(v) == shape(r) and dtype_str(v.type) == dtype_str(r.type)), None)
                if aliases and x and x[0] in storage and not copies:
                    sid = storage[x[0]]
                elif donor is not None:   # written into
                    sid = storage[x[donor]]
                    self.in_place.setdefault(op.operation, [-1] * len(op.operation.results))[j] = donor
                else:
                    sid = len(size)
                    size[sid], born[sid] = nbytes(r) if is_tensor(r) else 0, 4 * i
                    live += size[sid]
                storage[r] = sid
                if name in STRIDED or _strided_split(op) or \
                        (aliases and x and x[0] in strided and name != A + "clone" and not copies):
                    strided.add(r)
                members[sid] = members.get(sid, 0) + 1
                if not list(r.uses) and r not in returned:
                    live -= release(r, 4 * i + 1)
            if live + staging + work > peak:
                peak, peak_comm, peak_tick = live + staging + work, staging, 4 * i + 2
            self.moments.append(live + staging + work)
            for v in set(_reads(op)):
                if last.get(v) == i and v not in returned and storage.get(v, -1) != -1:
                    live -= release(v, 4 * i + 3)
            timeline.append(live)
        ret = next(o for o in self.ops if op_name(o) == "func.return")
        out = [(storage.get(v, -1), size.get(storage.get(v, -1), 0)) for v in ret.operation.operands]
        at_peak = {sid for sid, t in born.items() if t < peak_tick < died.get(sid, peak_tick + 1)}
        roles = strings(func_attr(self.func, "sp.results"))
        results = {sid for (sid, _), role in zip(out, roles) if sid >= 0 and role != "loss"}
        parts = {"comm": peak_comm,
                 "owned": sum(size[sid] for sid in at_peak if sid < -1),
                 "returned": sum(size[sid] for sid in at_peak & results)}
        return peak, parts, timeline, out


def _args_bytes(func, role: str) -> int:
    roles = strings(func_attr(func, "sp.args"))
    return sum(nbytes(a) for r, a in zip(roles, func.regions[0].blocks[0].arguments) if r.startswith(role))


def predict(module_op) -> dict[str, int]:
    funcs = {ir.StringAttr(f.attributes["sym_name"]).value: f for f in funcs_of(module_op)}
    if set(funcs) != {"forward", "backward"}:
        raise PassError("sp-plan-memory runs after sp-plan-remat (needs @forward and @backward)",
                        module_op.location)
    return predict_funcs(funcs["forward"], funcs["backward"])


def saved_storage(f_out: list[tuple[int, int]], bwd) -> dict[int, tuple[int, int]]:
    """The backward's `owned` arguments: the saved values enter it with the storage sharing they
    had in the forward (f_out: Simulation(forward).run()'s returned storage)."""
    b_roles = strings(func_attr(bwd, "sp.args"))
    first_saved = next(i for i, r in enumerate(b_roles + ["saved:"]) if r.startswith("saved:"))
    return {first_saved + j: out for j, out in enumerate(f_out[1:]) if out[0] >= 0}


def predict_funcs(fwd, bwd) -> dict[str, int]:
    """The prediction for one @forward / @backward pair (sp-plan-remat{policy=auto} simulates
    candidate pairs before it keeps one)."""
    params = _args_bytes(fwd, "param:") + _args_bytes(fwd, "buffer:")
    inputs = _args_bytes(fwd, "input:")
    grads = sum(nbytes(v) for v in bwd.regions[0].blocks[0].operations[
        len(bwd.regions[0].blocks[0].operations) - 1].operands)
    f_sim = Simulation(fwd)
    f_peak, f_parts, f_line, f_out = f_sim.run()
    owned = saved_storage(f_out, bwd)
    saved = sum(dict(owned.values()).values())
    b_sim = Simulation(bwd, owned)
    b_peak, b_parts, b_line, _ = b_sim.run()
    # at a forward peak, "saved" is what the forward has made to keep so far; at a backward peak,
    # the saved values not yet freed, and "gradients" the ones produced so far (they become .grad)
    if f_peak >= b_peak:
        at_peak = {"saved": f_parts["returned"], "gradients": 0, "comm": f_parts["comm"]}
    else:
        at_peak = {"saved": b_parts["owned"], "gradients": b_parts["returned"], "comm": b_parts["comm"]}
    at_peak["transient"] = max(f_peak, b_peak) - sum(at_peak.values())
    peak = params + inputs + max(f_peak, b_peak)
    for f, p, line in ((fwd, f_peak, f_line), (bwd, b_peak, b_line)):
        f.attributes["sp.live_peak_bytes"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), p)
        f.attributes["sp.live_timeline"] = ir.DenseI64ArrayAttr.get(line)
    return {"predicted_peak_bytes": peak, "parameters": params, "inputs": inputs, **at_peak,
            "saved_bytes": saved, "gradient_bytes": grads, "forward_peak_bytes": f_peak, "backward_peak_bytes": b_peak,
            "forward_timeline": f_line, "backward_timeline": b_line, "in_place": {**f_sim.in_place, **b_sim.in_place}}


PARTS = ("parameters", "gradients", "inputs", "saved", "transient", "comm")


def breakdown(plan: dict) -> str:
    """The peak's parts, as the budget errors print them."""
    return ", ".join(f"{k} {human(plan.get(k, 0))}" for k in PARTS)


@dataclass
class PlanMemory(Pass):
    """lifetimes and the predicted per-rank peak of one step (sp.memory)"""
    name: ClassVar[str] = "sp-plan-memory"
    budget: Bytes | None = option(None, "fail when the predicted per-rank peak exceeds it (e.g. 12GiB)", minimum=1)

    def run(self, module_op) -> None:
        plan = predict(module_op)
        in_place = plan.pop("in_place")
        for func in funcs_of(module_op):   # no buffer counted for these results: the runtime must write them so
            for op in body_ops(func):
                if op.operation in in_place:
                    op.operation.attributes["sp.in_place"] = ir.DenseI64ArrayAttr.get(in_place[op.operation])
                elif "sp.in_place" in op.operation.attributes:
                    del op.operation.attributes["sp.in_place"]
        i64 = ir.IntegerType.get_signless(64)
        module_op.attributes["sp.memory"] = ir.DictAttr.get(
            {k: ir.IntegerAttr.get(i64, v) for k, v in plan.items() if isinstance(v, int)})
        if self.budget is not None and plan["predicted_peak_bytes"] > self.budget:
            raise PassError(f"predicted peak {human(plan['predicted_peak_bytes'])} per rank exceeds the "
                            f"budget {human(self.budget)} ({breakdown(plan)})", module_op.location)
