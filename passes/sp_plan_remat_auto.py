"""sp-plan-remat{policy=auto budget=BYTES}: the per-value save/recompute plan with the least
recompute cost whose predicted peak fits the budget.

Cost model. Recomputing an op costs its roofline time, max(FLOPs / PEAK_FLOPS, bytes moved /
PEAK_BYTES_PER_S): matmuls 2MNK, attention 4·B·H·Sq·Sk·D (half when causal), everything else one
FLOP per output element; views are free. Only the ratios between ops matter for the choice.

Items. A base plan, `full` (save only what must be saved: layer boundaries, collectives, dropout,
scalars) or `sac` (also attention outputs and statistics), whichever fits; every other forward value
the backward would recompute is a candidate to save.
Because layer boundaries are always saved, the recompute closure of one layer does not depend on
the choices in another, so each layer is planned on its own: a greedy over its candidates adds, one
at a time, the value that removes the most recompute time per byte it adds to the saved set
(measured on the exact closure, so saving a value that makes others unnecessary counts). Each
layer's sequence of steps is made concave (a step followed by a better one is merged with it), so
a global order by that ratio respects every layer's order; the plans are the prefixes of it, from
the base (no step, "sac") to recomputing nothing ("sac+k/n": the first k of n steps).

Proof of fit. A prefix's peak is not estimated: it is simulated by sp-plan-memory on the emitted
@forward/@backward, the same prediction the budget is checked against. The longest prefix that
fits is found by bisection between a prefix that was simulated to fit and one that was simulated
not to. `none` is simulated first (if it fits, nothing is recomputed); the bisection runs from each
base that fits, and the cheapest plan that fits wins, so `auto` is never costlier than a named
policy that fits. If neither base fits, the error gives the smallest peak and its breakdown.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from torch_mlir import ir

from autosp.units import human

from .base import PassError
from .ops import VIEWS
from .sp_plan_memory import PARTS, breakdown, nbytes
from .torch_ir import is_tensor, op_name, shape

PEAK_FLOPS = 1.0e15         # dense half precision of one current accelerator; only ratios matter
PEAK_BYTES_PER_S = 3.0e12


def _bool_attr(op, name: str) -> bool:
    return name in op.attributes and bool(ir.IntegerAttr(op.attributes[name]).value)


def op_cost(op) -> tuple[int, int]:
    """(FLOPs, bytes moved) of one execution of op; (0, 0) for a view."""
    name = op_name(op)
    if name in VIEWS:
        return 0, 0
    ins = [x for x in op.operands if is_tensor(x)]
    outs = [r for r in op.results if is_tensor(r)]
    moved = sum(map(nbytes, ins)) + sum(map(nbytes, outs))
    if name in ("torch.aten.mm", "torch.aten.bmm", "torch.aten.addmm"):
        a, b = (ins[1], ins[2]) if name.endswith("addmm") else (ins[0], ins[1])
        flops = 2 * math.prod(shape(a)) * shape(b)[-1]
    elif name == "sp.attention":
        q, k = shape(ins[0]), shape(ins[1])
        flops = 4 * math.prod(q) * k[-2] // (2 if _bool_attr(op, "causal") else 1)
    else:
        flops = sum(math.prod(shape(r)) for r in outs)
    return flops, moved


def recompute_cost(ops) -> tuple[int, int]:
    """(FLOPs, bytes) of recomputing ops."""
    costs = [op_cost(o) for o in ops]
    return (sum(c[0] for c in costs), sum(c[1] for c in costs))


def seconds(cost: tuple[int, int]) -> float:
    return max(cost[0] / PEAK_FLOPS, cost[1] / PEAK_BYTES_PER_S)


@dataclass
class Step:
    values: list            # forward values saved by this step
    gain: int               # recompute picoseconds it removes
    added: int              # saved bytes it adds (may be negative)

    @property
    def ratio(self) -> float:
        return math.inf if self.added <= 0 else self.gain / self.added

    def merged(self, other: "Step") -> "Step":
        return Step(self.values + other.values, self.gain + other.gain, self.added + other.added)


class Planner:
    """The steps from a base plan (a Split of sp_plan_remat: sac or full) to no recompute."""

    def __init__(self, split):
        self.split = split
        self.cost: dict = {}
        self.base: dict = {}     # value -> the value whose storage it views (views save their base)
        self.order = {o.operation: i for i, o in enumerate(split.ops)}   # ties go to program order

    def op_ps(self, op) -> int:
        """Picoseconds, an integer: sums over sets must not depend on their order."""
        if op not in self.cost:
            self.cost[op] = round(seconds(op_cost(op)) * 1e12)
        return self.cost[op]

    def storage(self, v: ir.Value) -> ir.Value:
        if v not in self.base:
            op = self.split.owner(v)
            self.base[v] = self.storage(op.operands[0]) if op is not None and op_name(op) in VIEWS and \
                op.operands and is_tensor(op.operands[0]) else v
        return self.base[v]

    def closure(self, seeds: list, keep: set) -> tuple[int, int, set]:
        """(recompute picoseconds, saved bytes, recomputed ops) with `keep` saved beyond the base plan's."""
        split, recompute, saved = self.split, set(), set()
        stack = list(seeds)
        while stack:
            v = stack.pop()
            op = split.owner(v)
            if op is None or op not in split.forward or op in recompute:
                continue
            if v in keep or split.keep(v):
                saved.add(self.storage(v))
                continue
            recompute.add(op)
            stack.extend(op.operands)
        return (sum(self.op_ps(o) for o in recompute), sum(nbytes(s) for s in saved), recompute)

    def layer_steps(self, seeds: list) -> list[Step]:
        """Greedy: repeatedly save the value with the most recompute removed per byte added."""
        keep: set = set()
        cost, size, recompute = self.closure(seeds, keep)
        steps: list[Step] = []
        while cost > 0:
            best = None
            for op in sorted(recompute, key=self.order.__getitem__):
                if op_name(op) in VIEWS:
                    continue             # saving a view is saving its base: that is the candidate
                values = [r for r in op.results if is_tensor(r) and not self.split.keep(r)]
                c, s, rc = self.closure(seeds, keep | set(values))   # all results: else the op still runs
                if not values or c >= cost:
                    continue
                step = Step(values, cost - c, s - size)
                if best is None or (step.ratio, step.gain) > (best[0].ratio, best[0].gain):
                    best = (step, c, s, rc)
            if best is None:
                break
            step, cost, size, recompute = best
            keep.update(step.values)
            steps.append(step)
        return _concave(steps)

    def steps(self) -> list[Step]:
        """Every layer's steps, in one order of decreasing gain per byte."""
        by_layer: dict[str, list] = {}
        for v in self.split.backward_reads():
            op = self.split.owner(v)
            if op is not None and op in self.split.forward:
                by_layer.setdefault(self.split.segment_of(op), []).append(v)
        steps = [s for seeds in by_layer.values() for s in self.layer_steps(seeds)]
        return sorted(steps, key=lambda s: -s.ratio)    # stable: each layer's order is kept


def _concave(steps: list[Step]) -> list[Step]:
    """Merge a step with the next while the next removes more per byte, so ratios decrease."""
    out: list[Step] = []
    for s in steps:
        out.append(s)
        while len(out) > 1 and out[-1].ratio >= out[-2].ratio:
            last = out.pop()
            out[-1] = out[-1].merged(last)
    return out


@dataclass
class Trial:
    name: str
    split: object
    memory: dict
    recompute: tuple[int, int]      # FLOPs, bytes

    @property
    def peak(self) -> int:
        return self.memory["predicted_peak_bytes"]


def choose(make_split: Callable, measure: Callable[[object], dict], budget: int, location) -> tuple[Trial, list[Trial]]:
    """(the chosen plan, every plan simulated). make_split(policy, extra=()) builds a Split;
    measure(split) is sp-plan-memory's prediction for it."""
    def trial(name: str, split) -> Trial:
        return Trial(name, split, measure(split), split.recompute_cost)

    none = trial("none", make_split("none"))
    if none.peak <= budget:
        return none, [none]                 # nothing recomputed: no plan is cheaper
    tried = [none] + [trial(p, make_split(p)) for p in ("sac", "full")]
    fits = [t for t in tried if t.peak <= budget]
    for base in [t for t in tried[1:] if t.peak <= budget]:
        split = base.split
        steps = Planner(split).steps()
        extra = [v for op in split.forward for v in op.results if split.keep(v) and not split.mandatory(v)]
        lo, hi, found = 0, len(steps) + 1, base   # prefix lo simulated to fit; hi not to, or past the end
        while hi - lo > 1:
            mid = (lo + hi) // 2
            t = trial(f"{base.name}+{mid}/{len(steps)}", make_split("auto", extra + [v for s in steps[:mid] for v in s.values]))
            tried.append(t)
            if t.peak <= budget:
                lo, found = mid, t
            else:
                hi = mid
        fits.append(found)
    if not fits:
        best = min(tried, key=lambda t: t.peak)
        m = best.memory
        top = max(PARTS, key=lambda k: m.get(k, 0))
        raise PassError(f"no remat plan fits the budget {human(budget)}: the smallest predicted peak is "
                        f"{human(best.peak)} per rank (policy {best.name}), dominated by {top} ({human(m[top])}); "
                        + breakdown(m), location)
    return min(fits, key=lambda t: (seconds(t.recompute), t.peak)), tried
