"""autosp.compile: a short list of stages, as Triton's make_ttir -> make_ttgir -> ...

  capture   nn.Module          -> CapturedStep   one joint aten graph of loss + backward (frontend/)
  import    CapturedStep       -> torch dialect  torch-mlir's FxImporter (frontend/importer.py)
  sp        torch dialect      -> sp + torch     the named pipeline sp-pipeline{...} (passes/)
  host      sp + torch         -> artifact files the host program and the artifact (lowering/, packaging.py)
  codegen   artifact           -> artifact      each fused kernel -> Triton -> cubin / hsaco per target
                                                  (lowering/triton_kernels.py), kernels/<arch>/*

Each stage takes one value and returns the next; what later stages need from earlier ones (the
captured step's names and buffers) travels in the `Compilation`. With keep_ir, every stage's output
is kept in the artifact as ir/<n>-<stage>.*; a stage that fails names the one autosp-opt command
that reproduces it on the IR it was given.
"""
from __future__ import annotations

import json
import os
import shlex
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn as nn

from autosp import __version__
from autosp.frontend import CompileError, capture_train_step
from autosp.runtime import artifact as schema


@dataclass
class CompiledArtifact:
    files: dict[str, bytes]
    meta: dict
    timings: dict[str, float] = field(default_factory=dict)
    kernel_sources: dict[str, str] = field(default_factory=dict)   # kernel -> its Triton source

    @property
    def program(self) -> dict:
        return json.loads(self.files["program.json"])

    @property
    def plan(self) -> dict:
        return json.loads(self.files["plan.json"])

    @property
    def num_instructions(self) -> int:
        return sum(len(p["instructions"]) for p in self.program["programs"].values())

    @property
    def mlir(self) -> str:
        return self.files["program.mlir"].decode()

    def save(self, path: str) -> str:
        schema.write(path, self.files, self.meta)
        return path


@dataclass
class Compilation:
    """One compile's options and what its stages hand each other beside their values."""
    batch: int
    seq_len: int
    pipeline: str                       # the sp stage's pass pipeline
    remat: str
    precision: str = "fp32"
    keep_ir: bool = False
    packed: bool = False                # the step takes position_ids and document positions
    step: Any = None                    # the CapturedStep, set by capture
    context: Any = None                 # the MLIR context of import, sp and host
    ir: dict[str, str] = field(default_factory=dict)      # ir/<n>-<stage>.<ext> -> text (keep_ir)
    targets: tuple[str, ...] = ()       # GPU targets the kernels are compiled for (TARGETS' names)
    timings: dict[str, float] = field(default_factory=dict)


def _diagnostics(e: Exception) -> str:
    from autosp.passes.torch_ir import location_str
    diags = getattr(e, "error_diagnostics", None) or []
    lines = []
    for d in diags:
        where = location_str(d.location)
        lines.append(f"{where}: error: {d.message}" if where and not where.startswith("<") else
                     f"error: {d.message}")
    return "\n".join(lines) or str(e)


def _asm(module) -> str:
    return module.operation.get_asm(enable_debug_info=True)   # with the model source lines


def _reproduce(stage: str, ir_text: str, flags: str) -> str:
    """Write the IR a failing stage was given; the autosp-opt command that reruns the stage on it."""
    fd, path = tempfile.mkstemp(prefix=f"autosp-{stage}-input-", suffix=".mlir")
    with os.fdopen(fd, "w") as f:
        f.write(ir_text)
    return f"autosp-opt {path} {flags}"


def capture(model: nn.Module, c: Compilation):
    c.step = capture_train_step(model, c.batch, c.seq_len, c.precision, c.packed)
    return c.step


def _import(step):
    """(its own MLIR context, the torch-dialect module) of a captured step."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    from autosp.dialects import sp as sp_dialect
    from autosp.frontend.importer import import_step
    context = ir.Context()
    torch_d.register_dialect(context)
    with context, ir.Location.unknown():
        sp_dialect.load()
        context.enable_multithreading(False)
        return context, import_step(step, context)


def import_torch(step, c: Compilation):
    c.context, module = _import(step)
    return module


def run_pipeline(module, c: Compilation):
    from torch_mlir import ir

    from autosp.passes import build_pass_manager
    with c.context, ir.Location.unknown():
        try:
            build_pass_manager(c.pipeline).run(module.operation)
        except ir.MLIRError as e:
            # the passes changed the module in place: the stage's input is imported again, only now
            given = c.ir.get("1-import.mlir") or _asm(_import(c.step)[1])
            pipeline = c.pipeline if c.pipeline.startswith("builtin.module(") else f"builtin.module({c.pipeline})"
            raise _failed(CompileError(_diagnostics(e).removeprefix("error: ")),
                          _reproduce("sp", given, f"--pass-pipeline={shlex.quote(pipeline)}")) from None
    return module


def _failed(err: CompileError, command: str) -> CompileError:
    err.reproduce = command
    err.add_note(f"reproduce: {command}")
    return err


def lower_host(module, c: Compilation) -> CompiledArtifact:
    from torch_mlir import ir

    from autosp.lowering.host_program import lower_to_host_program
    from autosp.packaging import artifact
    from autosp.passes.torch_ir import location_str
    with c.context, ir.Location.unknown():
        try:
            program = lower_to_host_program(module)
        except Exception as e:  # PassError: an op the runtime cannot run
            loc = getattr(e, "location", None)
            where = location_str(loc) if loc is not None else ""
            raise _failed(CompileError(str(e), where if where and not where.startswith("<") else None),
                          _reproduce("host", _asm(module), "--emit=host-program")) from None
        return CompiledArtifact(*artifact(module, program, c.step, c.remat))


def codegen(art: CompiledArtifact, c: Compilation) -> CompiledArtifact:
    if not c.targets and not c.keep_ir:   # nothing to compile, no sources to keep
        return art
    from autosp.packaging import kernel_objects
    files, art.kernel_sources = kernel_objects(art.program, list(c.targets))
    art.files.update(files)
    return art


# name, function, how its result is kept (keep_ir): file extension, text
STAGES: list[tuple[str, Callable, str, Callable[[Any], str]]] = [
    ("capture", capture, "py", lambda step: step.graph.print_readable(print_output=False)),
    ("import", import_torch, "mlir", _asm),
    ("sp", run_pipeline, "mlir", _asm),
    ("host", lower_host, "json", lambda art: json.dumps(art.program, indent=1)),
    ("codegen", codegen, "json", lambda art: json.dumps(art.kernel_sources, indent=1)),
]


def run_stages(value, c: Compilation, first: str = "capture") -> CompiledArtifact:
    """The stages from `first` on: the artifact, with ir/<n>-<stage>.* if c.keep_ir."""
    names = [name for name, *_ in STAGES]
    for n, (name, fn, ext, text) in enumerate(STAGES[names.index(first):], start=names.index(first)):
        t = time.perf_counter()
        value = fn(value, c)
        c.timings[name] = time.perf_counter() - t
        if c.keep_ir:
            c.ir[f"{n}-{name}.{ext}"] = text(value)
    value.files.update({f"ir/{name}": text.encode() for name, text in c.ir.items()})
    value.timings = c.timings
    return value


def options(sp: int, dp: int, remat: str, memory_budget: int | str | None, tile: int | str | None,
            attention: str = "auto", length: int = 0, reserve: int | str = 0):
    """The sp stage's named pipeline, its options validated before anything runs; its budget is
    memory_budget less reserve."""
    from autosp.passes import OptionError, SpPipeline
    from autosp.units import human, less_reserve, parse_bytes
    if remat == "auto" and memory_budget is None:
        raise CompileError("remat='auto' needs a memory_budget (bytes or a string like '12GiB')")
    try:
        budget = parse_bytes(memory_budget) if memory_budget is not None else None
        held = parse_bytes(reserve) if reserve else 0
    except ValueError as e:
        raise CompileError(f"memory_budget / reserve: {e}") from None
    if held and budget is None:
        raise CompileError(f"reserve={human(held)} is held out of a memory_budget: give one")
    if budget is not None:
        try:
            budget = less_reserve(budget, held)
        except ValueError as e:
            raise CompileError(str(e)) from None
    try:
        return SpPipeline(sp=sp, dp=dp, attention=attention, remat=remat, budget=budget, tile=str(tile or 0),
                          length=length)
    except OptionError as e:
        raise CompileError(str(e).removeprefix("sp-pipeline: ")) from None


def padded_length(model: nn.Module, seq_len: int, sp: int) -> int:
    """The length the step is captured at: seq_len, or when sp does not divide it the next multiple of
    2 x sp (equal shards, and zigzag chunks for ring attention); sp-pad-sequence pads the inputs."""
    if seq_len % sp == 0:
        return seq_len
    padded = -(-seq_len // (2 * sp)) * 2 * sp
    config = getattr(model, "config", None)
    positions = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if isinstance(positions, int) and seq_len <= positions < padded:
        raise CompileError(f"sequence length {seq_len} is not divisible by sp={sp}, and padding it to {padded} "
                           f"tokens exceeds the model's {positions} positions; use a length divisible by {sp} "
                           f"(e.g. {seq_len - seq_len % sp})")
    return padded


def compile(model: nn.Module, example_inputs: tuple[torch.Tensor, torch.Tensor], sp: int = 1, dp: int = 1,
            remat: str = "sac", memory_budget: int | str | None = None, pipeline: str | None = None,
            tile: int | str | None = "auto", model_name: str | None = None, precision: str = "fp32",
            keep_ir: bool = False, attention: str = "auto", targets: tuple[str, ...] | list[str] = (),
            packed: bool = False, reserve: int | str = 0) -> CompiledArtifact:
    """Compile one training step of `model` for sp-way sequence parallelism (x dp data parallel).

    example_inputs = (input_ids, labels), both [batch, seq]; only their shapes are used, and the model
    may live on the meta device (build it under autosp.empty_weights()). remat: what the forward
    saves for the backward, "none" | "full" | "sac" (see passes/sp_plan_remat.py), or "auto": the
    per-value plan with the least recompute cost whose predicted peak fits memory_budget
    (passes/sp_plan_remat_auto.py). memory_budget: bytes or "12GiB";
    compiling fails above it, naming the predicted peak and its breakdown. reserve: the part of
    memory_budget the device holds beside the step, which the prediction does not count (on CUDA,
    cuBLAS keeps a workspace per stream: 32 MiB on Hopper by default); the step is planned to fit
    memory_budget - reserve, the budget its errors name.
    tile: run the LM head + loss and the MLPs in token chunks (sp-tile-sequence): "auto" (default)
    picks the chunk counts from the vocabulary, intermediate and hidden sizes, N forces N chunks,
    None or 0 turns it off. pipeline: a pass pipeline to run instead of sp-pipeline{...}.
    precision: "fp32" (default), "bf16" or "fp16": the step runs as under torch.autocast (CPU rules,
    frontend/capture.py) on the model's parameters as they are: fp32 parameters give mixed precision
    with fp32 master weights and gradients, bf16 parameters a pure bf16 step.
    keep_ir: keep every stage's IR in the artifact (ir/<n>-<stage>.*).
    A sequence length that sp does not divide is padded inside the step (passes/sp_pad_sequence.py):
    the loss and gradients are those of the unpadded tokens.
    targets: GPUs to compile the fused kernels for, ahead of time on this host: "cuda:90", "cuda:80",
    "hip:gfx942", "hip:gfx90a" (kernels/<arch>/*; needs triton); none: the runtime runs their ATen ops.
    attention: how attention is sharded: "ulysses" (all-to-alls split the heads across the ranks; sp
    must divide the heads), "ring" (each rank keeps its block of the sequence and the K/V blocks
    travel around the ranks, at KV-head width: any sp for any head count), "hybrid" (ulysses over u
    ranks x ring over r, u x r = sp), or "auto" (default): the scheme that sends the fewest bytes
    (passes/attention_scheme.py).
    packed: the compiled module also takes position_ids that restart per document (packed rows, or
    cu_seqlens) and an attention_mask (padding): attention stays within each document and padded
    tokens count for nothing (a Hugging Face causal LM; runtime/documents.py)."""
    from autosp.passes import expand

    input_ids, labels = example_inputs
    if input_ids.dim() != 2 or tuple(labels.shape) != tuple(input_ids.shape):
        raise CompileError(f"example_inputs must be (input_ids, labels) of one shape [batch, seq], got "
                           f"{list(input_ids.shape)} and {list(labels.shape)}")
    batch, seq_len = input_ids.shape
    captured = padded_length(model, seq_len, sp) if pipeline is None else seq_len
    named = options(sp, dp, remat, memory_budget, tile, attention, seq_len if captured != seq_len else 0, reserve)
    from autosp.lowering.triton_kernels import TARGETS
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise CompileError(f"unknown target {unknown[0]!r} (targets: {', '.join(TARGETS)})")
    c = Compilation(batch, captured, pipeline or named.text(), remat, precision, keep_ir, packed=packed,
                    targets=tuple(targets))
    art = run_stages(model, c)
    art.meta = {"compiler": f"autosp {__version__}", "model": model_name or type(model).__name__, **art.meta,
                "remat": remat, "attention": attention, "precision": precision, "packed": packed, "batch": batch, "seq_len": seq_len,
                **({"padded_seq_len": captured} if captured != seq_len else {}), "targets": ["host", *targets],
                "stages": [name for name, *_ in STAGES], "pipeline": c.pipeline,
                "passes": [element for element, _ in expand(c.pipeline)]}
    return art
