"""Compile time and peak memory of autosp.compile on a Llama-3.1-8B-shaped model, by depth.

What is measured: `autosp.compile(model, (input_ids, labels), sp=P)` for a transformers
LlamaForCausalLM with the Llama-3.1-8B shape (hidden 4096, intermediate 14336, 32 heads, 8 KV
heads, vocab 128256, rope_theta 500000, sdpa attention), built under `autosp.empty_weights()` so
the parameters live on meta and take no memory, at batch 1 and S = 131072 tokens, sp = 8. Only the
number of layers varies (default 4, 8, 16, 32).

Each depth is compiled in a fresh subprocess, so its peak RSS (getrusage ru_maxrss: the whole
process, imports of torch / transformers / torch-mlir included, nothing subtracted) is that
compile's alone. For each depth the table shows wall time of autosp.compile, the per-stage
timings the compiler reports (art.timings: one per stage: capture, import, sp, host), the peak RSS, the RSS
before compiling (model built, libraries imported) and the number of host-program instructions.

Goals (PASS/FAIL lines): the 32-layer compile takes <= 120 s on the 2-core compile host, and its
peak RSS is <= 8 GB (8 GiB). `--quick` compiles 4 and 8 layers only, a fast check that prints no
goal lines (they need the 32-layer run).

    python benchmarks/compile_scale.py                 # 4, 8, 16, 32 layers
    python benchmarks/compile_scale.py --quick
    python benchmarks/compile_scale.py --layers 32 --seq-len 131072 --sp 8
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

GOAL_SECONDS = 120.0
GOAL_RSS_MB = 8 * 1024.0
GOAL_LAYERS = 32


def rss_mb() -> float:
    """Current resident set size of this process in MiB (VmRSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS in /proc/self/status")


def compile_once(layers: int, seq_len: int, sp: int, batch: int) -> dict:
    """Build the 8B-shaped model on meta with `layers` layers and compile it; runs in the worker."""
    import torch
    import transformers

    import autosp

    from llama8b import LLAMA_8B
    config = transformers.LlamaConfig(num_hidden_layers=layers, **LLAMA_8B)
    with autosp.empty_weights():
        model = transformers.LlamaForCausalLM(config)
    ids = torch.zeros(batch, seq_len, dtype=torch.long)
    rss_before = rss_mb()
    t = time.perf_counter()
    art = autosp.compile(model, example_inputs=(ids, ids.clone()), sp=sp)
    total = time.perf_counter() - t
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB
    return {"layers": layers, "seconds": total, "timings": art.timings, "peak_rss_mb": peak_mb,
            "rss_before_mb": rss_before, "ops": art.num_instructions}


def run_worker(layers: int, args: argparse.Namespace) -> dict:
    """Compile one depth in a fresh interpreter; returns its result, or {"error": ...}."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(layers), "--seq-len", str(args.seq_len),
           "--sp", str(args.sp), "--batch", str(args.batch)]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"layers": layers, "error": f"timed out after {args.timeout:.0f} s"}
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
        return {"layers": layers, "error": f"worker exited {proc.returncode} after {wall:.1f} s:\n{tail}"}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_seconds"] = wall
    return result


def print_table(results: list[dict]) -> None:
    from autosp.compiler import STAGES
    stages = [name for name, *_ in STAGES]
    head = (f"{'layers':>6} {'compile s':>10} " + " ".join(f"{s + ' s':>10}" for s in stages)
            + f" {'peak RSS MB':>12} {'RSS before':>11} {'ops':>8} {'s/layer':>8}")
    print(head)
    print("-" * len(head))
    for r in results:
        if "error" in r:
            print(f"{r['layers']:>6} ERROR: {r['error']}")
            continue
        print(f"{r['layers']:>6} {r['seconds']:>10.1f} " + " ".join(f"{r['timings'].get(s, 0.0):>10.2f}" for s in stages)
              + f" {r['peak_rss_mb']:>12.0f} {r['rss_before_mb']:>11.0f} {r['ops']:>8} "
              f"{r['seconds'] / r['layers']:>8.2f}")


def print_growth(results: list[dict]) -> None:
    ok = [r for r in results if "error" not in r]
    for a, b in zip(ok, ok[1:]):
        print(f"{a['layers']} -> {b['layers']} layers (x{b['layers'] / a['layers']:.1f}): compile time "
              f"x{b['seconds'] / a['seconds']:.2f}, peak RSS x{b['peak_rss_mb'] / a['peak_rss_mb']:.2f}, "
              f"ops x{b['ops'] / a['ops']:.2f}")


def print_goals(results: list[dict]) -> None:
    goal = next((r for r in results if r["layers"] == GOAL_LAYERS), None)
    if goal is None:
        print(f"goals not checked: the {GOAL_LAYERS}-layer configuration was not run")
        return
    if "error" in goal:
        print(f"FAIL  {GOAL_LAYERS}-layer compile: {goal['error'].splitlines()[0]}")
        return
    for name, value, limit, unit in (("compile time", goal["seconds"], GOAL_SECONDS, "s"),
                                     ("peak RSS", goal["peak_rss_mb"] / 1024.0, GOAL_RSS_MB / 1024.0, "GB")):
        verdict = "PASS" if value <= limit else "FAIL"
        print(f"{verdict}  {GOAL_LAYERS}-layer {name} {value:.1f} {unit} (goal <= {limit:.0f} {unit})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", default="4,8,16,32", help="comma-separated layer counts (default 4,8,16,32)")
    p.add_argument("--seq-len", type=int, default=131072, help="global sequence length S (default 131072)")
    p.add_argument("--sp", type=int, default=8, help="sequence-parallel degree (default 8)")
    p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    p.add_argument("--quick", action="store_true", help="only 4 and 8 layers")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per compile (default 1800)")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()

    if args.worker is not None:
        print(json.dumps(compile_once(args.worker, args.seq_len, args.sp, args.batch)))
        return

    layers = [4, 8] if args.quick else [int(x) for x in args.layers.split(",")]
    print(f"Llama-3.1-8B shape, batch {args.batch}, S = {args.seq_len}, sp = {args.sp}, "
          f"{os.cpu_count()} CPUs (load average {os.getloadavg()[0]:.1f}), one fresh process per depth")
    results = []
    for n in layers:
        r = run_worker(n, args)
        results.append(r)
        status = r["error"].splitlines()[0] if "error" in r else f"{r['seconds']:.1f} s, {r['peak_rss_mb']:.0f} MB"
        print(f"  compiled {n} layers: {status}", flush=True)
    print()
    print_table(results)
    print()
    print_growth(results)
    print_goals(results)


if __name__ == "__main__":
    main()
