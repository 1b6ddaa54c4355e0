"""autosp: an MLIR ahead-of-time compiler for sequence-parallel LLM training.

    art = autosp.compile(model, example_inputs=(input_ids, labels), sp=P)
    art.save("m.autosp")
    m = autosp.load("m.autosp")       # inside a process group of world sp x dp

`import autosp` loads only the runtime; the compiler (torch-mlir) is imported on first use, so the
GPU machines that only train need neither torch-mlir nor the frontend.
"""
from autosp.runtime import ArtifactError, IntegrityError, load

__version__ = "0.1.0"
_COMPILER = {"compile": "autosp.compiler", "CompiledArtifact": "autosp.compiler",
             "CompileError": "autosp.frontend.errors", "empty_weights": "autosp.frontend.sources"}
__all__ = ["ArtifactError", "IntegrityError", "load", "__version__", *_COMPILER]


def __getattr__(name: str):
    if name in _COMPILER:
        import importlib
        return getattr(importlib.import_module(_COMPILER[name]), name)
    raise AttributeError(f"module 'autosp' has no attribute {name!r}")
