"""The `sp.*` attributes that carry the contract between the importer, the passes, the host lowering
and the artifact writer: what each means, where it sits, who writes it and who reads it.
test/python/test_layering.py checks the sources against this table."""
from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from .base import PassError


@dataclass(frozen=True)
class Attribute:
    name: str
    on: str                      # module | func | op
    writers: tuple[str, ...]
    readers: tuple[str, ...]
    meaning: str


ATTRIBUTES = {a.name: a for a in (
    Attribute("sp.args", "func", ("importer", "sp-plan-remat"),
              ("sp-merge-projections", "sp-propagate-sequence", "sp-partition-sequence", "sp-pad-sequence",
               "sp-tile-sequence", "sp-plan-remat", "sp-plan-memory", "host-program"),
              "each argument's role and name: param:NAME | buffer:NAME | input:NAME | saved:N"),
    Attribute("sp.results", "func", ("importer", "sp-plan-remat"),
              ("sp-partition-sequence", "sp-pad-sequence", "sp-plan-remat", "sp-plan-memory", "host-program"),
              "each result's name: loss | grad:NAME | saved:N"),
    Attribute("sp.layout", "op", ("sp-propagate-sequence", "sp-tile-sequence"),
              ("sp-partition-sequence", "sp-tile-sequence"),
              "the layout of each result: rep | partial | seq<dim[,inner]>"),
    Attribute("sp.demand", "op", ("sp-propagate-sequence",), ("sp-partition-sequence",),
              "operand index -> the layout the op needs it in (a re-shard partitioning inserts)"),
    Attribute("sp.arg_layouts", "func", ("sp-propagate-sequence", "sp-plan-remat"),
              ("sp-partition-sequence", "sp-tile-sequence", "sp-plan-remat"),
              "the layout of each argument"),
    Attribute("sp.seq_len", "func", ("sp-propagate-sequence", "sp-plan-remat"),
              ("sp-partition-sequence", "sp-tile-sequence", "sp-plan-remat"),
              "the global sequence length"),
    Attribute("sp.mesh", "module", ("sp-partition-sequence",), ("sp-tile-sequence", "host-program"),
              "{sp, dp[, order][, ulysses]}: the degrees the step was partitioned for, the sequence order "
              "(zigzag for causal ring attention) and the ulysses part of hybrid attention"),
    Attribute("sp.attention_scheme", "module", ("sp-partition-sequence",), ("artifact",),
              "{scheme, bytes: {scheme: bytes per rank per step}}: the attention scheme and its alternatives"),
    Attribute("sp.tiles", "module", ("sp-tile-sequence",), ("artifact",),
              "what was tiled: [{kind, loc, chunks, tokens, width}]"),
    Attribute("sp.remat", "func", ("sp-plan-remat",), ("sp-tile-sequence",),
              "on @forward: the remat policy the step was split with"),
    Attribute("sp.recomputed", "func", ("sp-plan-remat",), ("artifact",),
              "on @backward: what it recomputes, per kind of op"),
    Attribute("sp.remat_auto", "module", ("sp-plan-remat",), ("artifact",),
              "remat=auto: the budget, every plan simulated and the one chosen"),
    Attribute("sp.kernel", "func", ("sp-fuse",), ("torch-ir", "codegen"),
              "on a kernel function: {domain: the static shape one launch computes over, ops: how many ops it "
              "fuses}; funcs_of leaves kernels out, kernels_of lists them"),
    Attribute("sp.memory", "module", ("sp-plan-memory",), ("artifact",),
              "the predicted per-rank peak and its breakdown, in bytes"),
    Attribute("sp.live_peak_bytes", "func", ("sp-plan-memory",), (),
              "the function's own peak of live bytes (for reading the IR)"),
    Attribute("sp.live_timeline", "func", ("sp-plan-memory",), ("artifact",),
              "live bytes after each instruction"),
    Attribute("sp.in_place", "op", ("sp-plan-memory",), ("host-program",),
              "on sp.all_reduce or a kernel call: per result, the operand whose storage (dying at the op) it is "
              "written into, or -1; the plan counts no new buffer for those"),
)}


def func_attr(func, name: str) -> ir.Attribute:
    """An sp.* attribute of a function, or a diagnostic naming what should have set it."""
    if name not in func.attributes:
        origin = ATTRIBUTES[name].writers[0]   # the others pass it on
        raise PassError(f"the function has no '{name}' attribute; it is set by "
                        f"{'the ' if origin == 'importer' else ''}{origin}", func.location)
    return func.attributes[name]
