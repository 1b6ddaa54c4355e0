"""User-facing compile errors that name the model source line."""
from __future__ import annotations

import contextlib
import os
import traceback

import torch

# frames of these trees are plumbing, not model code
_SKIP = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)),
         os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep + "python",
         os.path.dirname(contextlib.__file__) + os.sep + "contextlib.py", "<frozen",
         os.sep + "transformers" + os.sep + "utils" + os.sep)


_BUILTIN_MODELS = (os.sep + "tiny_llama.py",)   # model code shipped inside the frontend


class CompileError(Exception):
    """An error in the user's model or arguments, with the numbers involved."""

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: error: {message}" if where else f"error: {message}")


class CaptureError(CompileError):
    pass


def user_source() -> tuple[str, int] | None:
    """(file, line) of the innermost frame that belongs to model code (not torch, not autosp)."""
    for fr in reversed(traceback.extract_stack()[:-1]):
        plumbing = fr.filename.startswith(_SKIP) or any(s in fr.filename for s in _SKIP)
        if not plumbing or fr.filename.endswith(_BUILTIN_MODELS):
            return fr.filename, fr.lineno
    return None


def user_frame() -> str | None:
    """file:line of the innermost model-code frame."""
    src = user_source()
    return f"{src[0]}:{src[1]}" if src else None
