"""autosp.passes: one pass per file, the registry (every pass, by name) and the default pipeline."""
from .base import OptionError, Pass, PassError
from .pipeline import SpPipeline
from .registry import PASSES, build_pass_manager, expand

__all__ = ["PASSES", "OptionError", "Pass", "PassError", "SpPipeline", "build_pass_manager", "expand"]
