"""The default autosp pipeline, one readable list (like Triton's stage list)."""
from __future__ import annotations

from . import sp_partition_sequence, sp_plan_remat, sp_propagate_sequence, sp_raise_attention  # noqa: F401

DEFAULT_REMAT = "sac"


def default_pipeline(sp: int, dp: int = 1, remat: str = DEFAULT_REMAT) -> str:
    stages = [
        "sp-raise-attention",                      # captured attention -> sp.attention(_grad)
        "sp-propagate-sequence",                   # layouts: rep / partial / seq<d>
        f"sp-partition-sequence{{sp={sp} dp={dp}}}",  # local shapes + collectives
        "canonicalize",
        "cse",
        f"sp-plan-remat{{policy={remat}}}",         # @forward / @backward: saved vs recomputed
    ]
    return "builtin.module(" + ",".join(stages) + ")"
