"""autosp: an MLIR ahead-of-time compiler for sequence-parallel LLM training.

    art = autosp.compile(model, example_inputs=(input_ids, labels), sp=P)
    art.save("m.autosp")
    m = autosp.load("m.autosp")       # inside a process group of world sp x dp
"""
from autosp.frontend import CompileError, empty_weights
from autosp.runtime import ArtifactError, IntegrityError, load

from .compiler import CompiledArtifact, __version__, compile

__all__ = ["ArtifactError", "CompileError", "CompiledArtifact", "IntegrityError", "__version__", "compile",
           "empty_weights", "load"]
