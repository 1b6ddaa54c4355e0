"""The default autosp pipeline, one readable list (like Triton's stage list)."""
from __future__ import annotations

from . import (sp_partition_sequence, sp_plan_memory, sp_plan_remat, sp_propagate_sequence,  # noqa: F401
               sp_raise_attention, sp_tile_sequence)

DEFAULT_REMAT = "sac"


def default_pipeline(sp: int, dp: int = 1, remat: str = DEFAULT_REMAT, memory_budget: int | None = None,
                     tile: int | str | None = None) -> str:
    stages = [
        "sp-raise-attention",                      # captured attention -> sp.attention(_grad)
        "sp-propagate-sequence",                   # layouts: rep / partial / seq<d>
        f"sp-partition-sequence{{sp={sp} dp={dp}}}",  # local shapes + collectives
        "canonicalize",
        "cse",
        *([f"sp-tile-sequence{{chunks={tile}}}" if tile != "auto" else "sp-tile-sequence"] if tile else []),  # LM head + loss in token chunks: tile=N | "auto" | None (off)
        # @forward / @backward: saved vs recomputed (auto: per value, the least recompute that fits the budget)
        f"sp-plan-remat{{policy={remat}" + (f" budget={memory_budget}" if remat == "auto" else "") + "}",
        "sp-plan-memory" + (f"{{budget={memory_budget}}}" if memory_budget else ""),  # predicted peak
    ]
    return "builtin.module(" + ",".join(stages) + ")"
