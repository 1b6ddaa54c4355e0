"""autosp.runtime: artifact format and integrity, executor, kernels, collectives, nn.Module.
Imports nothing from MLIR or the compiler."""
from .artifact import ArtifactError, IntegrityError
from .module import CompiledModule, load

__all__ = ["ArtifactError", "CompiledModule", "IntegrityError", "load"]
