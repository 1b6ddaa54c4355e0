"""Pass registry and textual pipelines mixing autosp passes with upstream / torch-mlir passes.

A Python pass cannot be named inside an MLIR pipeline string, so pipelines are split at top-level
commas: autosp passes are added as callables, runs of other passes as text.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from torch_mlir import ir
from torch_mlir.passmanager import PassManager


@dataclass(frozen=True)
class PassInfo:
    name: str
    fn: Callable
    description: str


PASSES: dict[str, PassInfo] = {}


class PassError(Exception):
    """A diagnostic at an IR location; the pass reports it as an MLIR error and fails."""

    def __init__(self, message: str, location: ir.Location | None = None):
        super().__init__(message)
        self.location = location


_PRODUCERS = {"sp.args": "the importer (argument roles)", "sp.results": "the importer (result names)",
              "sp.arg_layouts": "sp-propagate-sequence", "sp.seq_len": "sp-propagate-sequence"}


def func_attr(func, name: str) -> ir.Attribute:
    """An sp.* attribute of the step function, or a diagnostic naming what should have set it."""
    if name not in func.attributes:
        raise PassError(f"the function has no '{name}' attribute; it is set by {_PRODUCERS.get(name, 'an earlier pass')}",
                        func.location)
    return func.attributes[name]


def register(name: str, description: str):
    """Decorator: fn(module_op, **options) becomes pass `name`; PassError becomes a diagnostic."""
    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def run(op, pass_, **options) -> None:
            try:
                fn(op, **options)
            except PassError as e:
                (e.location or op.location).emit_error(f"{name}: {e}")
                pass_.signal_pass_failure()

        PASSES[name] = PassInfo(name, run, description)
        return fn
    return deco


def split_top(text: str) -> list[str]:
    """Split 'a,b(c,d),e{x=1 y=2}' at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "({"
        depth -= ch in ")}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_options(text: str) -> dict[str, str]:
    """'sp=2 dp=1' or 'sp=2,dp=1' -> {'sp': '2', 'dp': '1'}."""
    opts = {}
    for item in text.replace(",", " ").split():
        key, eq, val = item.partition("=")
        if not eq:
            raise ValueError(f"pass option {item!r} is not key=value")
        opts[key] = val
    return opts


def build_pass_manager(pipeline: str) -> PassManager:
    pipeline = pipeline.strip()
    if pipeline.startswith("builtin.module(") and pipeline.endswith(")"):
        pipeline = pipeline[len("builtin.module("):-1]
    pm = PassManager("builtin.module")
    pending: list[str] = []

    def flush() -> None:
        if pending:
            pm.add(",".join(pending))
            pending.clear()

    for element in split_top(pipeline):
        name, _, rest = element.partition("{")
        name = name.strip()
        if name in PASSES:
            flush()
            opts = parse_options(rest.rstrip("}")) if rest else {}
            pm.add(functools.partial(PASSES[name].fn, **opts), name=name, argument=name,
                   description=PASSES[name].description)
        else:
            pending.append(element)
    flush()
    return pm
