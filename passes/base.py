"""What a pass is: a dataclass whose fields are its typed, documented options (as xDSL's ModulePass),
parsed and validated once, when a pipeline is built; `run` transforms the module.

    @dataclass
    class TileSequence(Pass):
        '''run the LM head + loss and the MLPs in chunks of tokens (one-line summary)'''
        name: ClassVar[str] = "sp-tile-sequence"
        chunks: int | None = option(None, "token chunks; None: chosen from the shapes", minimum=1)

        def run(self, module_op) -> None: ...
"""
from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, NewType

from torch_mlir import ir

from autosp.units import parse_bytes

Bytes = NewType("Bytes", int)   # an option written as 12GiB, 500MB or 1e9


class PassError(Exception):
    """A diagnostic at an IR location; the pass reports it as an MLIR error and fails."""

    def __init__(self, message: str, location: ir.Location | None = None):
        super().__init__(message)
        self.location = location


class OptionError(ValueError):
    """A pass option that does not parse or is out of range: reported before any pass runs."""


def option(default: Any, help: str, *, minimum: int | None = None, choices: tuple[str, ...] | None = None) -> Any:
    return dataclasses.field(default=default, metadata={"help": help, "minimum": minimum, "choices": choices})


def _parse_value(pass_name: str, key: str, text: str, typ: Any) -> Any:
    kinds = typing.get_args(typ) or (typ,)   # X | None: the None is the default, never written
    kind = next(k for k in kinds if k is not type(None))
    try:
        if kind is Bytes:
            return parse_bytes(text)
        return kind(text)
    except ValueError:
        what = {int: "an integer", Bytes: "a size (e.g. 12GiB, 500MB, 1e9)"}.get(kind, kind.__name__)
        raise OptionError(f"{pass_name}: {key}={text!r} is not {what}") from None


@dataclass
class Pass:
    name: ClassVar[str]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value, meta = getattr(self, f.name), f.metadata
            if value is None:
                continue
            if meta.get("minimum") is not None and value < meta["minimum"]:
                raise OptionError(f"{self.name}: {f.name}={value} is below its minimum {meta['minimum']} ({meta['help']})")
            if meta.get("choices") and value not in meta["choices"]:
                raise OptionError(f"{self.name}: {f.name}={value!r} is not one of {', '.join(meta['choices'])}")
        self.validate()

    def validate(self) -> None:
        """Checks between options (each option's own range is checked from its metadata)."""

    def run(self, module_op: ir.Operation) -> None:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        return (cls.__doc__ or "").strip().splitlines()[0]

    @classmethod
    def options(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    @classmethod
    def parse(cls, text: str) -> "Pass":
        """From the text between the braces of `name{key=value key=value}` ('' for no options)."""
        hints = typing.get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        values = {}
        for item in text.replace(",", " ").split():
            key, eq, val = item.partition("=")
            if not eq:
                raise OptionError(f"{cls.name}: pass option {item!r} is not key=value")
            if key not in known:
                raise OptionError(f"{cls.name}: unknown option {key!r} (options: {', '.join(sorted(known)) or 'none'})")
            values[key] = _parse_value(cls.name, key, val, hints[key])
        return cls(**values)

    def text(self) -> str:
        """The pipeline element that builds this pass: its name and every option not at its default."""
        opts = " ".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                        if getattr(self, f.name) != f.default)
        return f"{self.name}{{{opts}}}" if opts else self.name


class PipelinePass(Pass):
    """A named pipeline: a pass that stands for a list of pipeline elements."""

    def expand(self) -> list[str]:
        raise NotImplementedError
