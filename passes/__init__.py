"""autosp.passes: one pass per file, the registry and the default pipeline."""
from .pipeline import default_pipeline
from .registry import PASSES, PassError, build_pass_manager

__all__ = ["PASSES", "PassError", "build_pass_manager", "default_pipeline"]
