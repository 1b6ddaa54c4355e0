"""autosp.compile: model -> captured joint step -> torch dialect -> sp passes -> host program -> artifact."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from autosp.frontend import CompileError, capture_train_step
from autosp.runtime import artifact as schema

from autosp import __version__


@dataclass
class CompiledArtifact:
    files: dict[str, bytes]
    meta: dict
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def program(self) -> dict:
        return json.loads(self.files["program.json"])

    @property
    def num_instructions(self) -> int:
        return sum(len(p["instructions"]) for p in self.program["programs"].values())

    @property
    def mlir(self) -> str:
        return self.files["program.mlir"].decode()

    def save(self, path: str) -> str:
        schema.write(path, self.files, self.meta)
        return path


def _diagnostics(e: Exception) -> str:
    from autosp.passes.torch_ir import location_str
    diags = getattr(e, "error_diagnostics", None) or []
    lines = []
    for d in diags:
        where = location_str(d.location)
        lines.append(f"{where}: error: {d.message}" if where and not where.startswith("<") else
                     f"error: {d.message}")
    return "\n".join(lines) or str(e)


def _budget(budget: int | str | None) -> int | None:
    from autosp.passes.sp_plan_memory import parse_bytes
    return parse_bytes(budget) if isinstance(budget, str) else budget


def _dict(d) -> dict:
    """A DictAttr of integers, strings and DictAttrs as plain Python."""
    from torch_mlir import ir
    out = {}
    for i in range(len(d)):
        a = d[i].attr.maybe_downcast()
        out[d[i].name] = _dict(a) if isinstance(a, ir.DictAttr) else a.value
    return out


def _plan(module, program: dict, remat: str) -> dict:
    """plan.json: the remat decision (what is saved, what recomputed), what is tiled, the memory plan of
    sp-plan-memory, the communication."""
    from torch_mlir import ir

    from autosp.inspect_artifact import communication
    from autosp.passes.torch_ir import funcs_of
    attrs = module.operation.attributes
    memory = _dict(ir.DictAttr(attrs["sp.memory"])) if "sp.memory" in attrs else {}
    timeline = {ir.StringAttr(f.attributes["sym_name"]).value: list(ir.DenseI64ArrayAttr(f.attributes["sp.live_timeline"]))
                for f in funcs_of(module) if "sp.live_timeline" in f.attributes}
    fwd = program["programs"]["forward"]
    saved = [a for a in program["programs"]["backward"]["args"] if a["role"] == "saved"]
    auto = _dict(ir.DictAttr(attrs["sp.remat_auto"])) if "sp.remat_auto" in attrs else {}
    tiled = [_dict(ir.DictAttr(t)) for t in ir.ArrayAttr(attrs["sp.tiles"])] if "sp.tiles" in attrs else []
    recomputed = next((_dict(ir.DictAttr(f.attributes["sp.recomputed"])) for f in funcs_of(module)
                       if "sp.recomputed" in f.attributes), {})
    return {"remat": remat, "memory": memory, "timeline": timeline, **({"auto": auto} if auto else {}),
            "saved": [{"shape": a["shape"], "dtype": a["dtype"]} for a in saved],
            "recomputed": recomputed, "tiled": tiled,
            "backward_instructions": len(program["programs"]["backward"]["instructions"]),
            "forward_instructions": len(fwd["instructions"]),
            "communication": communication(program)}


def lower_step(step, sp: int, dp: int, remat: str, memory_budget: int | None = None, tile=None,
               pipeline: str | None = None) -> tuple[dict, str, dict, dict]:
    """A captured step through import, the passes and lowering: (program, final MLIR, plan, timings)."""
    from torch_mlir import ir
    from torch_mlir.dialects import torch as torch_d

    from autosp.dialects import sp as sp_dialect
    from autosp.frontend.importer import import_step
    from autosp.passes import build_pass_manager, default_pipeline
    from autosp.passes.host_program import lower_to_host_program
    from autosp.passes.torch_ir import location_str

    timings = {}
    ctx = ir.Context()
    torch_d.register_dialect(ctx)
    with ctx, ir.Location.unknown():
        sp_dialect.load()
        ctx.enable_multithreading(False)
        t = time.perf_counter()
        module = import_step(step, ctx)
        timings["import"] = time.perf_counter() - t
        t = time.perf_counter()
        try:
            build_pass_manager(pipeline or default_pipeline(sp, dp, remat, memory_budget, tile=tile)).run(
                module.operation)
        except ir.MLIRError as e:
            raise CompileError(_diagnostics(e).removeprefix("error: ")) from None
        timings["passes"] = time.perf_counter() - t
        t = time.perf_counter()
        try:
            program = lower_to_host_program(module)
        except Exception as e:  # PassError: an op the runtime cannot run
            loc = getattr(e, "location", None)
            where = location_str(loc) if loc is not None else ""
            raise CompileError(str(e), where if where and not where.startswith("<") else None) from None
        mlir_text = module.operation.get_asm(enable_debug_info=True)  # with the model source lines
        plan = _plan(module, program, remat)
        timings["lower"] = time.perf_counter() - t
    return program, mlir_text, plan, timings


def compile(model: nn.Module, example_inputs: tuple[torch.Tensor, torch.Tensor], sp: int = 1, dp: int = 1,
            remat: str = "sac", memory_budget: int | str | None = None, pipeline: str | None = None,
            tile: int | str | None = "auto", model_name: str | None = None,
            precision: str = "fp32") -> CompiledArtifact:
    """Compile one training step of `model` for sp-way sequence parallelism (x dp data parallel).

    example_inputs = (input_ids, labels), both [batch, seq]; only their shapes are used, and the model
    may live on the meta device (build it under autosp.empty_weights()). remat: what the forward
    saves for the backward, "none" | "full" | "sac" (see passes/sp_plan_remat.py), or "auto": the
    per-value plan with the least recompute cost whose predicted peak fits memory_budget
    (passes/remat_budget.py). memory_budget: bytes or "12GiB";
    compiling fails above it, naming the predicted peak and its breakdown.
    tile: run the LM head + loss and the MLPs in token chunks (sp-tile-sequence): "auto" (default)
    picks the chunk counts from the vocabulary, intermediate and hidden sizes, N forces N chunks,
    None or 0 turns it off.
    precision: "fp32" (default), "bf16" or "fp16": the step runs as under torch.autocast (CPU rules,
    frontend/capture.py) on the model's parameters as they are: fp32 parameters give mixed precision
    with fp32 master weights and gradients, bf16 parameters a pure bf16 step."""
    from autosp.passes import default_pipeline
    from autosp.passes.registry import split_top

    input_ids, labels = example_inputs
    if input_ids.dim() != 2 or tuple(labels.shape) != tuple(input_ids.shape):
        raise CompileError(f"example_inputs must be (input_ids, labels) of one shape [batch, seq], got "
                           f"{list(input_ids.shape)} and {list(labels.shape)}")
    batch, seq_len = input_ids.shape
    if sp < 1 or dp < 1:
        raise CompileError(f"sp and dp must be >= 1, got sp={sp} dp={dp}")
    if seq_len % sp:
        raise CompileError(f"sequence length {seq_len} is not divisible by sp={sp}: each rank must hold "
                           f"the same number of tokens (try {seq_len - seq_len % sp} or {seq_len + sp - seq_len % sp})")
    budget = _budget(memory_budget)
    if remat == "auto" and budget is None:
        raise CompileError("remat='auto' needs a memory_budget (bytes or a string like '12GiB')")
    t = time.perf_counter()
    step = capture_train_step(model, batch, seq_len, precision)
    capture_s = time.perf_counter() - t
    program, mlir_text, plan, timings = lower_step(step, sp, dp, remat, budget, tile, pipeline)
    timings["capture"] = capture_s
    pipeline = pipeline or default_pipeline(sp, dp, remat, budget, tile=tile)

    files = {"program.json": json.dumps(program).encode(), "program.mlir": mlir_text.encode(),
             "plan.json": json.dumps(plan).encode()}
    params = {"parameters": {}, "buffers": {}}
    shapes = {a["name"]: a for a in program["programs"]["forward"]["args"]}
    for name in step.param_names:
        params["parameters"][name] = {"shape": shapes[name]["shape"], "dtype": shapes[name]["dtype"],
                                      "requires_grad": step.requires_grad[name],
                                      "aliases": step.param_aliases.get(name, [])}
    for name in step.buffer_names:
        buf = step.buffers[name].contiguous()
        rel = f"buffers/{name}.bin"
        files[rel] = buf.reshape(-1).view(torch.uint8).numpy().tobytes() if buf.numel() else b""
        params["buffers"][name] = {"shape": list(buf.shape), "dtype": schema.DTYPE_NAMES[buf.dtype], "file": rel}
    files["params.json"] = json.dumps(params, indent=1).encode()
    n_params = sum(int(torch.Size(p["shape"]).numel()) for p in params["parameters"].values())
    meta = {"compiler": f"autosp {__version__}", "model": model_name or type(model).__name__,
            "mesh": program["mesh"], "remat": remat, "batch": batch, "seq_len": seq_len, "parameters": n_params,
            "targets": ["host"], "pipeline": pipeline,
            "stages": split_top(pipeline.removeprefix("builtin.module(")[:-1])}
    return CompiledArtifact(files, meta, timings)
