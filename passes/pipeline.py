"""The default autosp pipeline, one readable list (like Triton's stage list), as a named pipeline:
`sp-pipeline{sp=2 dp=1 attention=auto remat=sac budget=12GiB tile=auto bucket=25MiB}` runs from autosp-opt like any pass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .base import Bytes, OptionError, PipelinePass, option
from .sp_coalesce_collectives import DEFAULT_BUCKET
from .attention_scheme import MODE_HELP, mode_error
from .sp_fuse import Fuse
from .sp_plan_remat import POLICIES
from .sp_tile_sequence import TileSequence
from .tiling import floor_for

DEFAULT_REMAT = "sac"


@dataclass
class SpPipeline(PipelinePass):
    """the default pipeline: captured step -> partitioned, tiled @forward/@backward with a memory plan"""
    name: ClassVar[str] = "sp-pipeline"
    sp: int = option(1, "sequence-parallel degree", minimum=1)
    dp: int = option(1, "data-parallel degree (world = sp x dp)", minimum=1)
    attention: str = option("auto", MODE_HELP)
    remat: str = option(DEFAULT_REMAT, "what the forward saves for the backward", choices=POLICIES)
    budget: Bytes | None = option(None, "per-rank memory budget: remat=auto plans to fit it, the memory plan "
                                        "fails above it", minimum=1)
    tile: str = option("auto", "token chunks for the LM head + loss and the MLPs: auto, N, or 0 (off)")
    length: int = option(0, "the sequence length the step takes, when it was captured padded to a multiple of "
                            "2 x sp (0: as captured)", minimum=0)
    bucket: Bytes = option(DEFAULT_BUCKET, "the most bytes one packed collective carries; 0: one collective each",
                           minimum=0)

    def validate(self) -> None:
        if mode_error(self.attention, self.sp):
            raise OptionError(f"{self.name}: {mode_error(self.attention, self.sp)}")
        if self.remat == "auto" and self.budget is None:
            raise OptionError(f"{self.name}: remat=auto needs budget=BYTES (e.g. budget=12GiB)")
        if self.tile != "auto" and not self.tile.isdigit():
            raise OptionError(f"{self.name}: tile={self.tile!r} is not auto, a number of chunks, or 0 (off)")

    def expand(self) -> list[str]:
        tile = [] if self.tile == "0" else [   # its options where not at their defaults
            TileSequence(chunks=None if self.tile == "auto" else int(self.tile), floor=floor_for(self.budget)).text()]
        return [
            "sp-raise-attention",                                # captured attention -> sp.attention(_grad)
            "sp-merge-projections",                              # q / k / v, gate / up: one matmul each
            "sp-propagate-sequence",                             # layouts: rep / partial / seq<d>
            f"sp-partition-sequence{{sp={self.sp} dp={self.dp} attention={self.attention}}}",  # local shapes +
                                                                 # collectives
            *([f"sp-pad-sequence{{length={self.length}}}"] if self.length else []),  # inputs padded inside
            "sp-elide-halo",                                     # the labels' shift without an exchange
            "canonicalize",
            "cse",
            *tile,                                               # LM head + loss and MLPs in token chunks
                                                                 # (a budget lowers the floor of auto chunks)
            # @forward / @backward: saved vs recomputed (auto: per value, the least recompute that fits)
            f"sp-plan-remat{{policy={self.remat}"
            + (f" budget={self.budget} bucket={self.bucket} fuse={Fuse.min_ops}" if self.remat == "auto" else "") + "}",
            *([f"sp-coalesce-collectives{{bucket={self.bucket}}}"] if self.bucket else []),  # gradient buckets
            # pointwise chains and row reductions -> kernel functions; before the memory plan, so it
            # counts each kernel's inputs and outputs and never the intermediates a kernel keeps inside
            "sp-fuse",
            "sp-plan-memory" + (f"{{budget={self.budget}}}" if self.budget else ""),   # predicted peak
        ]
