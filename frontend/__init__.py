"""autosp.frontend: model sources, training-step capture, FX -> torch-mlir import."""
from .capture import CapturedStep, capture_train_step
from .errors import CaptureError, CompileError
from .sources import empty_weights, load_model

__all__ = ["CapturedStep", "capture_train_step", "CaptureError", "CompileError", "empty_weights", "load_model"]
