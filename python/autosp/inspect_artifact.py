"""What an artifact does per step: stages, collectives and the bytes they move, parameters."""
from __future__ import annotations

import json
import math
from collections import defaultdict

from autosp.passes.ops import VIEWS
from autosp.runtime.artifact import DTYPES, KERNEL, Artifact, ring_hops
from autosp.runtime.kernels import op_flash
from autosp.runtime.packing import packs
from autosp.units import human

COLLECTIVES = ("sp.all_to_all", "sp.all_reduce", "sp.all_gather", "sp.reduce_scatter", "sp.halo",
               "sp.ring_attention", "sp.ring_attention_grad")


def _bytes(shape: list[int], dtype: str) -> int:
    return math.prod(shape) * DTYPES[dtype].itemsize


def communication(artifact_program: dict) -> dict[str, dict[str, float]]:
    """Per collective kind: count and bytes each rank sends per step (forward and backward, ring
    algorithms)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0, "bytes": 0.0})
    for program in artifact_program["programs"].values():
        _count(program, artifact_program["mesh"], out)
    return dict(out)


def _count(program: dict, mesh: dict, out: dict) -> None:
    shapes = {i: (a["shape"], a["dtype"]) for i, a in enumerate(program["args"])}
    for inst in program["instructions"]:
        for r, s, d in zip(inst["out"], inst["shapes"], inst.get("dtypes", [None] * len(inst["out"]))):
            if s is not None:
                shapes[r] = (s, d)
    u = mesh.get("ulysses", 1)
    sizes = {"sp": mesh["sp"], "dp": mesh["dp"], "world": mesh["sp"] * mesh["dp"], "ulysses": u,
             "ring": mesh["sp"] // u}
    for inst in program["instructions"]:
        if inst["op"] not in COLLECTIVES:
            continue
        n = sizes[inst["attrs"]["group"]]
        shape, dtype = shapes[inst["args"][0]["r"]]
        b = _bytes(shape, dtype)
        if inst["op"].startswith("sp.ring_attention"):
            kv = [shapes[a["r"]] for a in inst["args"][1:3] if inst["op"] == "sp.ring_attention"] or \
                [shapes[a["r"]] for a in inst["args"][2:4]]
            a = inst["attrs"]
            hops = ring_hops(n, kv[0][0][2], a["causal"], a.get("window", 0))
            sent = hops * sum(_bytes(s, d) for s, d in kv)        # each K/V block on its hops
            if inst["op"] == "sp.ring_attention_grad":             # and its fp32 dk / dv one more
                sent += (hops + 1) * sum(_bytes(s, "float32") for s, _ in kv)
        elif inst["op"] == "sp.all_reduce":
            sent = 2 * (n - 1) / n * b
        elif inst["op"] == "sp.halo":
            sent = (n - 1) / n * b / shape[inst["attrs"]["dim"]] * inst["attrs"]["width"] * n
        elif inst["op"] == "sp.all_gather":
            sent = (n - 1) * b
        else:  # all_to_all, reduce_scatter
            sent = (n - 1) / n * b
        entry = out[inst["op"]]
        entry["count"] += 1
        entry["bytes"] += sent


def _launches(insts: list[dict]) -> int:
    """Device launches of instructions: a view (and a list unpack) launches nothing."""
    return sum(inst["op"] != "prim.unpack" and "torch." + inst["op"].removesuffix(".default") not in VIEWS
               for inst in insts)


def kernels(artifact_program: dict) -> dict[str, int]:
    """The fused kernels (sp-fuse) and the launches per step with them ("launches") and without them, each
    kernel's ATen ops launched one by one ("aten_launches"); a view counts as none, and so does a cat of
    parameters the runtime keeps side by side (sp-merge-projections' stacked weights: a view). Both
    count the program as compiled, so the matmuls sp-merge-projections saved are on both sides."""
    out = {"kernels": 0, "launches": 0, "aten_launches": 0}
    for program in artifact_program["programs"].values():
        ks = program.get("kernels", {})
        out["kernels"] += len(ks)
        stacked = packs(program)   # a view of the parameters, kept side by side (runtime/packing.py)
        insts = [i for n, i in enumerate(program["instructions"]) if n not in stacked]
        out["launches"] += _launches(insts)
        out["aten_launches"] += sum(_launches(ks[i["attrs"]["name"]]["instructions"]) if i["op"] == KERNEL
                                    else _launches([i]) for i in insts)
    return out


def _kernels(prog: dict) -> str:
    k = kernels(prog)
    fused = ", ".join(f"{name} {len(p.get('kernels', {}))}" for name, p in prog["programs"].items())
    return (f"kernels      {k['kernels']} fused ({fused}); launches per step {k['launches']}, the ATen program's "
            f"{k['aten_launches']} ({k['aten_launches'] / max(k['launches'], 1):.2f}x)")


def objects(art: Artifact) -> dict[str, dict]:
    """Per GPU target compiled for: its folder, the kernels with an object, the objects, the kernels
    that fall back to their ATen ops."""
    out = {}
    for rel in sorted(art.manifest["files"]):
        parts = rel.split("/")
        if len(parts) == 3 and parts[0] == "kernels" and parts[2] == "launch.json":
            doc = json.loads(art.read(rel))
            out[doc["target"]] = {"folder": f"kernels/{parts[1]}", "kernels": len(doc["kernels"]),
                                  "objects": len({e["object"] for e in doc["kernels"].values()}),
                                  "fallback": sorted(doc["fallback"])}
    return out


def _objects(art: Artifact) -> list[str]:
    return [f"  {target:12s} {o['kernels']} kernels in {o['objects']} objects ({o['folder']})"
            + (f", {len(o['fallback'])} run as ATen ops: {', '.join(o['fallback'][:4])}" if o["fallback"] else "")
            for target, o in objects(art).items()] or ["  no GPU targets: every kernel runs as the ATen ops it replaced"]


def _saved(prog: dict) -> str:
    fwd = prog["programs"]["forward"]
    saved = [(s, d) for r, (s, d) in zip(fwd["results"], _result_specs(fwd)) if r.startswith("saved:")]
    return f"{len(saved)} tensors, {human(sum(_bytes(s, d) for s, d in saved))} per rank"


def _remat(p: dict, policy: str | None) -> str:
    auto = p.get("auto")
    return f"auto (plan {auto['chosen']}, budget {human(auto['budget_bytes'])})" if auto else str(policy)


def _recomputed(p: dict) -> str:
    r = p.get("recomputed")
    if not r:
        return ""
    return f"; it recomputes {r['ops']} ops ({r['flops'] / 1e6:.1f} MFLOP)" if r["ops"] else "; it recomputes nothing"


def _tiled(p: dict) -> list[str]:
    """One line per kind of tiled region: where, how many chunks, the [tokens, width] never made whole."""
    by_kind: dict[tuple, list[str]] = {}
    for t in p.get("tiled", []):
        by_kind.setdefault((t["kind"], t["chunks"], t["tokens"], t["width"]), []).append(t["module"])
    lines = []
    for (kind, n, tokens, width), where in by_kind.items():
        what = "LM head + loss" if kind == "lm_head" else f"{len(where)} MLP{'s' if len(where) > 1 else ''}"
        lines.append(f"{'tiled' if not lines else '':12s} {what} in {n} chunks: [{tokens}, {width}] never whole "
                     f"({', '.join(where)})")
    return lines or ["tiled        nothing"]


def _attention(prog: dict, plan: dict) -> list[str]:
    """How attention is sharded, from the program's mesh and attention ops, and the bytes per rank per
    step of the schemes the compiler weighed (plan.json's attention)."""
    mesh, sp = prog["mesh"], prog["mesh"]["sp"]
    u = mesh.get("ulysses", 1)
    ops = {inst["op"] for inst in prog["programs"]["forward"]["instructions"]}
    ring = "sp.ring_attention" in ops
    if not ring and "sp.attention" not in ops:
        return ["attention    none"]
    if not ring:
        text = f"ulysses: all-to-alls split the heads over {sp} rank{'s' if sp > 1 else ''}"
    else:
        r = sp // u
        shards = ("2 zigzag chunks of the sequence (i and 2 x r - 1 - i: equal causal work)"
                  if mesh.get("order") == "zigzag" else "a contiguous block of the sequence")
        windows = sorted({i["attrs"].get("window", 0) for i in prog["programs"]["forward"]["instructions"]
                          if i["op"] == "sp.ring_attention"} - {0})
        text = (f"hybrid {u} x {r}: all-to-alls split the heads over {u} ranks, and " if u > 1 else "ring: ") + \
            f"each of {r} ring ranks keeps {shards}, K/V blocks pass around the ring" + \
            (f" (in sliding windows of {', '.join(map(str, windows))}, only to the ranks they reach)" if windows else "")
    weighed = plan.get("attention", {}).get("bytes", {})
    lines = [f"attention    {text}", "             on CUDA: " + _cuda_kernels(prog["programs"]["forward"])]
    if weighed:
        lines.append("             bytes per rank per step: " + ", ".join(
            f"{k} {human(v)}" for k, v in sorted(weighed.items(), key=lambda kv: kv[1])))
    return lines


def _cuda_kernels(program: dict) -> str:
    """Which kernel CUDA runs each attention op of the forward with (runtime/kernels.py), counted."""
    specs = _specs(program)
    chosen: dict[str, int] = defaultdict(int)
    for inst in program["instructions"]:
        if inst["op"] in ("sp.attention", "sp.ring_attention"):
            (_, _, rows, d), dtype = specs[inst["args"][0]["r"]]
            docs = len(inst["args"]) == 4   # the optional document positions
            a = inst["attrs"]
            flash = op_flash(DTYPES[dtype].itemsize == 2, d, rows, a["causal"], a.get("window", 0), docs,
                             inst["op"] == "sp.ring_attention")
            chosen[("FlashAttention-2" + " over documents (variable-length)" * docs) if flash else
                   "the memory-efficient kernel" + " with a dense mask" * bool(docs or a.get("window", 0))] += 1
    return ", ".join(f"{name} for {n} attention op{'s' * (n > 1)}" for name, n in chosen.items())


def _specs(program: dict) -> dict[int, tuple[list[int], str]]:
    """register -> (shape, dtype) of the program's arguments and of every instruction's results."""
    specs = {i: (a["shape"], a["dtype"]) for i, a in enumerate(program["args"])}
    for inst in program["instructions"]:
        for r, s, d in zip(inst["out"], inst["shapes"], inst["dtypes"]):
            specs[r] = (s, d)
    return specs


def _result_specs(program: dict) -> list[tuple[list[int], str]]:
    specs = _specs(program)
    return [specs[o] for o in program["outputs"]]


def report(art: Artifact) -> str:
    man, prog, info = art.manifest, art.program, plan(art)
    lines = [f"artifact     {art.path}",
             f"model        {man.get('model')}   ({man['parameters']:,} parameters)",
             f"mesh         sp={prog['mesh']['sp']} x dp={prog['mesh']['dp']}   "
             f"step input [{man['batch']}, {man['seq_len']}] tokens"
             + (f" (padded to {man['padded_seq_len']} inside the step)" if "padded_seq_len" in man else "")
             + ("; packed documents (position_ids or cu_seqlens) and right padding (attention_mask)"
                if man.get("packed") else ""),
             f"format       v{man['format_version']}  {man.get('compiler')}  targets: {', '.join(man.get('targets', []))}",
             "stages       " + " -> ".join(f"sp({', '.join(man.get('passes', []))})" if s == "sp" else s
                                       for s in man.get("stages", [])),
             f"remat        {_remat(info, man.get('remat'))}: the forward saves {_saved(prog)} for the backward"
             + _recomputed(info),
             *_attention(prog, info),
             *_tiled(info),
             "program      " + ", ".join(f"{name} {len(p['instructions'])} instructions"
                                         for name, p in prog["programs"].items()),
             _kernels(prog), *_objects(art)]
    comm = communication(prog)
    lines.append("collectives per step (bytes sent by each rank):")
    total = 0.0
    for kind in COLLECTIVES:
        if kind in comm:
            c = comm[kind]
            total += c["bytes"]
            lines.append(f"  {kind:22s} x{c['count']:<5d} {human(c['bytes']):>12s}")
    lines.append(f"  {'total':22s} {'':6s} {human(total):>12s}")
    mem = info.get("memory")
    if mem:
        lines.append(f"memory       predicted peak {human(mem['predicted_peak_bytes'])} per rank: " + ", ".join(
            f"{k} {human(mem[k])}" for k in BREAKDOWN))
    return "\n".join(lines)


BREAKDOWN = ("parameters", "inputs", "saved", "gradients", "transient", "comm")


def plan(art: Artifact) -> dict:
    return json.loads(art.read("plan.json")) if "plan.json" in art.manifest["files"] else {}


def as_json(art: Artifact) -> dict:
    """What `autospc inspect --json` prints."""
    p = plan(art)
    mem = p.get("memory", {})
    return {"model": art.manifest.get("model"), "mesh": art.program["mesh"], "remat": p.get("remat"),
            "batch": art.manifest["batch"], "seq_len": art.manifest["seq_len"],
            "parameters": art.manifest["parameters"],
            "predicted_peak_bytes": mem.get("predicted_peak_bytes"),
            "breakdown": {k: mem.get(k) for k in BREAKDOWN},
            "saved_bytes": mem.get("saved_bytes"), "saved_tensors": len(p.get("saved", [])),
            "recomputed": p.get("recomputed"), "tiled": p.get("tiled", []),
            **({"auto": p["auto"]} if "auto" in p else {}),
            "instructions": {k: len(v["instructions"]) for k, v in art.program["programs"].items()},
            "kernels": kernels(art.program), "objects": objects(art),
            "communication": communication(art.program)}


def plot_timeline(art: Artifact, path: str) -> None:
    """The memory timeline of one step (forward then backward) with its resident breakdown."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    p = plan(art)
    mem, line = p["memory"], p["timeline"]
    base = mem["parameters"] + mem["inputs"]
    fwd, bwd = line.get("forward", []), line.get("backward", [])
    mib = 2 ** 20
    fig, ax = plt.subplots(figsize=(10, 4.5))
    xs = range(len(fwd) + len(bwd))
    ax.fill_between(xs, 0, base / mib, color="#bbbbbb", label=f"parameters + inputs ({human(base)})")
    ax.fill_between(xs, base / mib, [(base + v) / mib for v in fwd + bwd], color="#4477aa",
                    label="activations, saved values, gradients")
    ax.axvline(len(fwd), color="k", lw=0.8, ls="--")
    ax.text(len(fwd), ax.get_ylim()[1] * 0.02, " backward", va="bottom")
    ax.axhline(mem["predicted_peak_bytes"] / mib, color="#cc3311", lw=1,
               label=f"predicted peak {human(mem['predicted_peak_bytes'])}")
    ax.set_xlabel("instruction (forward, then backward)")
    ax.set_ylabel("MiB per rank")
    ax.set_title(f"{art.manifest.get('model')}  [{art.manifest['batch']}, {art.manifest['seq_len']}]  "
                 f"sp={art.program['mesh']['sp']}  remat={p.get('remat')}")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

