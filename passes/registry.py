"""Every autosp pass, in one explicit table (name -> class), and textual pipelines that mix them with
upstream / torch-mlir passes.

A Python pass cannot be named inside an MLIR pipeline string, so pipelines are split at top-level
commas: autosp passes are added as callables (named pipelines expanded), runs of other passes as
text. Every autosp pass's options are parsed and validated here, before anything runs.
"""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from .base import Pass, PassError, PipelinePass
from .pipeline import SpPipeline
from .sp_coalesce_collectives import CoalesceCollectives
from .sp_elide_halo import ElideHalo
from .sp_fuse import Fuse
from .sp_merge_projections import MergeProjections
from .sp_pad_sequence import PadSequence
from .sp_partition_sequence import PartitionSequence
from .sp_plan_memory import PlanMemory
from .sp_plan_remat import PlanRemat
from .sp_propagate_sequence import PropagateSequence
from .sp_raise_attention import RaiseAttention
from .sp_tile_sequence import TileSequence

PASSES: dict[str, type[Pass]] = {p.name: p for p in (
    RaiseAttention, MergeProjections, PropagateSequence, PartitionSequence, PadSequence, ElideHalo, TileSequence, PlanRemat,
    CoalesceCollectives, Fuse, PlanMemory, SpPipeline)}


def split_top(text: str) -> list[str]:
    """Split 'a,b(c,d),e{x=1 y=2}' at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "({"
        depth -= ch in ")}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_element(element: str) -> Pass | None:
    """The autosp pass a pipeline element builds (options parsed and validated), or None for another
    pass."""
    name, _, rest = element.partition("{")
    cls = PASSES.get(name.strip())
    return cls.parse(rest.rstrip("}")) if cls else None


def expand(pipeline: str) -> list[tuple[str, Pass | None]]:
    """The pipeline's elements with every named pipeline replaced by its own, each with the autosp
    pass it builds (None for another pass)."""
    pipeline = pipeline.strip()
    if pipeline.startswith("builtin.module(") and pipeline.endswith(")"):
        pipeline = pipeline[len("builtin.module("):-1]
    out = []
    for element in split_top(pipeline):
        p = parse_element(element)
        out += expand(",".join(p.expand())) if isinstance(p, PipelinePass) else [(element, p)]
    return out


def _runner(p: Pass):
    def run(op: ir.Operation, pass_) -> None:
        try:
            p.run(op)
        except PassError as e:
            (e.location or op.location).emit_error(f"{p.name}: {e}")
            pass_.signal_pass_failure()
    return run


def build_pass_manager(pipeline: str) -> PassManager:
    pm = PassManager("builtin.module")
    pending: list[str] = []

    def flush() -> None:
        if pending:
            pm.add(",".join(pending))
            pending.clear()

    for element, p in expand(pipeline):
        if p is None:
            pending.append(element)
            continue
        flush()
        pm.add(_runner(p), name=p.name, argument=p.name, description=p.summary())
    flush()
    return pm
