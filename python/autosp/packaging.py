"""The one module that builds an artifact's files: program.json (the host program), program.mlir,
plan.json (remat, tiling, memory and communication report), params.json and buffers/*.bin. The
manifest is runtime/artifact.py's (the schema both sides share); the stage loop adds the kept IR,
ir/<n>-<stage>.*."""
from __future__ import annotations

import json
import math
import tempfile

import torch
from torch_mlir import ir

from autosp.frontend import CapturedStep
from autosp.inspect_artifact import communication
from autosp.lowering.triton_kernels import TARGETS, Unsupported, compile_object, generate
from autosp.passes.torch_ir import funcs_of
from autosp.runtime import artifact as schema


def _dict(d) -> dict:
    """A DictAttr of integers, strings and DictAttrs as plain Python."""
    out = {}
    for i in range(len(d)):
        a = d[i].attr.maybe_downcast()
        out[d[i].name] = _dict(a) if isinstance(a, ir.DictAttr) else a.value
    return out


def plan(module: ir.Module, program: dict, remat: str) -> dict:
    """plan.json: the remat decision (what is saved, what recomputed), what is tiled, the memory plan of
    sp-plan-memory, the communication."""
    attrs = module.operation.attributes
    memory = _dict(ir.DictAttr(attrs["sp.memory"])) if "sp.memory" in attrs else {}
    timeline = {ir.StringAttr(f.attributes["sym_name"]).value: list(ir.DenseI64ArrayAttr(f.attributes["sp.live_timeline"]))
                for f in funcs_of(module) if "sp.live_timeline" in f.attributes}
    fwd = program["programs"]["forward"]
    saved = [a for a in program["programs"]["backward"]["args"] if a["role"] == "saved"]
    auto = _dict(ir.DictAttr(attrs["sp.remat_auto"])) if "sp.remat_auto" in attrs else {}
    tiled = [_dict(ir.DictAttr(t)) for t in ir.ArrayAttr(attrs["sp.tiles"])] if "sp.tiles" in attrs else []
    attention = _dict(ir.DictAttr(attrs["sp.attention_scheme"])) if "sp.attention_scheme" in attrs else {}
    recomputed = next((_dict(ir.DictAttr(f.attributes["sp.recomputed"])) for f in funcs_of(module)
                       if "sp.recomputed" in f.attributes), {})
    return {"remat": remat, "memory": memory, "timeline": timeline, **({"auto": auto} if auto else {}),
            "saved": [{"shape": a["shape"], "dtype": a["dtype"]} for a in saved],
            "recomputed": recomputed, "tiled": tiled, **({"attention": attention} if attention else {}),
            "backward_instructions": len(program["programs"]["backward"]["instructions"]),
            "forward_instructions": len(fwd["instructions"]),
            "communication": communication(program)}


def params(step: CapturedStep, program: dict) -> tuple[dict, dict[str, bytes]]:
    """params.json (names, shapes, dtypes, tied names) and the buffer files it names."""
    out = {"parameters": {}, "buffers": {}}
    files = {}
    shapes = {a["name"]: a for a in program["programs"]["forward"]["args"]}
    for name in step.param_names:
        out["parameters"][name] = {"shape": shapes[name]["shape"], "dtype": shapes[name]["dtype"],
                                   "requires_grad": step.requires_grad[name],
                                   "aliases": step.param_aliases.get(name, [])}
    for name in step.buffer_names:
        buf = step.buffers[name].contiguous()
        rel = f"buffers/{name}.bin"
        files[rel] = buf.reshape(-1).view(torch.uint8).numpy().tobytes() if buf.numel() else b""
        out["buffers"][name] = {"shape": list(buf.shape), "dtype": schema.DTYPE_NAMES[buf.dtype], "file": rel}
    return out, files


def artifact(module: ir.Module, program: dict, step: CapturedStep, remat: str) -> tuple[dict[str, bytes], dict]:
    """Every file of the artifact but the manifest and the kept IR, and what the manifest says of the
    program (mesh, parameter count)."""
    param_json, buffers = params(step, program)
    files = {"program.json": json.dumps(program).encode(),
             "program.mlir": module.operation.get_asm(enable_debug_info=True).encode(),  # with model source lines
             "plan.json": json.dumps(plan(module, program, remat)).encode(),
             "params.json": json.dumps(param_json, indent=1).encode(), **buffers}
    n_params = sum(math.prod(p["shape"]) for p in param_json["parameters"].values())
    return files, {"mesh": program["mesh"], "parameters": n_params}


def kernel_objects(program: dict, targets: list[str]) -> tuple[dict[str, bytes], dict[str, str]]:
    """The GPU objects of the program's kernels for each target, compiled on this host: per target
    kernels/<arch>/<object>.{cubin,hsaco} and kernels/<arch>/launch.json (kernel -> its object, grid
    and launch metadata; "fallback": the kernels codegen cannot express, and why, which the runtime
    runs as ATen ops). Kernels of one body share one object, named after its source. Also each
    kernel's Triton source (for keep_ir)."""
    generated, fallback = {}, {}
    for prog in program["programs"].values():
        for name, k in prog.get("kernels", {}).items():
            try:
                body = generate("kernel", k)
            except Unsupported as e:
                fallback[name] = str(e)
                continue
            generated[name] = generate("k" + schema.sha256(body.source.encode())[:16], k)
    files: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="autosp-codegen-") as folder:
        for target in targets:
            arch, ext = TARGETS[target][3:]
            launches, built = {}, {}
            for name, tk in generated.items():
                if tk.name not in built:
                    files[f"kernels/{arch}/{tk.name}.{ext}"], built[tk.name] = compile_object(tk, target, folder)
                launches[name] = {"object": f"{tk.name}.{ext}", "grid": [tk.grid, 1, 1], **built[tk.name]}
            files[f"kernels/{arch}/launch.json"] = json.dumps(
                {"target": target, "kernels": launches, "fallback": fallback}, indent=1).encode()
    return files, {name: tk.source for name, tk in generated.items()}
