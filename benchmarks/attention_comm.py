"""Bytes each rank sends per attention layer: Ulysses, ring and hybrid, as chosen and as forced.

A Llama-3.1-8B-shaped model (32 heads, 8 KV heads, head dim 128; benchmarks/llama8b.py) with one
layer is captured once at batch 1 and S tokens (default 131072) and compiled for every scheme that
sp = 8, 16, 32 allows (`attention="UxR"`: Ulysses over U ranks x ring over R) and as `auto` chooses.
For each compiled program the table shows, per rank, per layer, forward + backward:

  program   the bytes its attention collectives send (all-to-alls and all-gathers of the Ulysses
            part, the K/V blocks and fp32 dK/dV of ring attention), counted from the host program
            by the same rule as `autospc inspect`;
  model     what the compiler's cost model predicted for it (passes/attention_scheme.py);
  minimum   the scheme's analytical minimum at the attention's dtype: Ulysses moves (u-1)/u of q, k,
            v, out forward and of their gradients backward, and when u exceeds the KV heads each rank
            still needs only the one KV head its query heads read (1/KV-heads of the sequence's K/V
            per rank and tensor); ring moves each K/V block r-1 hops forward and again backward,
            and dK/dV r hops (back to their owner);
  x min     program / minimum.

Goal (issue 11): the chosen plan sends within 5% of the best forced plan, at every sp (PASS/FAIL).

    python benchmarks/attention_comm.py                      # sp 8, 16, 32 at S = 131072, bf16
    python benchmarks/attention_comm.py --sp 8 --seq-len 32768 --precision fp32
"""
from __future__ import annotations

import argparse
import time

import torch
import transformers

import autosp
from autosp.compiler import Compilation, capture, options, run_stages
from autosp.inspect_artifact import communication
from autosp.passes.attention_scheme import Scheme, candidates
from llama8b import LLAMA_8B

ATTENTION_COLLECTIVES = ("sp.all_to_all", "sp.all_gather", "sp.ring_attention", "sp.ring_attention_grad")
GOAL = 1.05


def minimum_bytes(s: Scheme, kv_heads: int, q: float, kv: float, itemsize: int) -> float:
    """The least bytes one rank sends per attention (forward + backward) under scheme s; q and kv are
    the bytes of its local q and k before any re-shard."""
    u, r = s.ulysses, s.ring
    total = 0.0
    if u > 1:
        total += 4 * (u - 1) / u * q                                      # q, out, dout, dq
        per_kv = (u - 1) / u * kv if kv_heads % u == 0 else (u - 1) / kv_heads * kv
        total += 4 * per_kv                                               # k, v, dk, dv
    if r > 1:
        total += 2 * (r - 1) * kv * 2 + r * 2 * kv                       # K/V out and back, dK/dV
    return total


def scheme_of(program: dict) -> Scheme:
    """The scheme a host program runs: its mesh's ulysses degree, or all sp ranks for one kind."""
    sp = program["mesh"]["sp"]
    ring = any(i["op"] == "sp.ring_attention" for i in program["programs"]["forward"]["instructions"])
    u = program["mesh"].get("ulysses", 1 if ring else sp)
    return Scheme(u, sp // u)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sp", default="8,16,32", help="comma-separated sp degrees (default 8,16,32)")
    p.add_argument("--seq-len", type=int, default=131072, help="global sequence length S (default 131072)")
    p.add_argument("--precision", default="bf16", choices=["fp32", "bf16"], help="compile precision (default bf16)")
    args = p.parse_args()
    degrees = [int(x) for x in args.sp.split(",")]

    cfg = transformers.LlamaConfig(num_hidden_layers=1, **LLAMA_8B)
    with autosp.empty_weights():
        model = transformers.LlamaForCausalLM(cfg)
    heads, kv_heads, head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads
    itemsize = 2 if args.precision == "bf16" else 4
    t = time.perf_counter()
    base = Compilation(1, args.seq_len, "", "sac", args.precision)
    step = capture(model, base)
    print(f"Llama-3.1-8B shape, 1 layer, S={args.seq_len}, {args.precision}: captured in "
          f"{time.perf_counter() - t:.0f} s; bytes per rank per attention layer, forward + backward")

    verdicts = []
    for sp in degrees:
        q = args.seq_len // sp * heads * head_dim * itemsize
        kv = q * kv_heads // heads
        rows = {}
        for mode in ["auto"] + [f"{s.ulysses}x{s.ring}" for s in candidates("auto", sp, [heads])]:
            c = Compilation(1, args.seq_len, options(sp, 1, "sac", None, "auto", mode).text(), "sac", args.precision)
            c.step = step
            art = run_stages(step, c, first="import")
            comm = communication(art.program)
            sent = sum(comm[k]["bytes"] for k in ATTENTION_COLLECTIVES if k in comm)
            scheme = scheme_of(art.program)
            rows[mode] = (scheme, sent, art.plan["attention"]["bytes"][str(scheme)])
        head = f"{'sp':>3} {'plan':<18} {'program':>10} {'model':>10} {'minimum':>10} {'x min':>6}"
        print("\n" + head + "\n" + "-" * len(head))
        for mode, (chosen, sent, model_bytes) in rows.items():
            least = minimum_bytes(chosen, kv_heads, q, kv, itemsize)
            label = f"auto -> {chosen}" if mode == "auto" else f"forced {chosen}"
            print(f"{sp:>3} {label:<18} {sent / 2**20:>8.1f}Mi {model_bytes / 2**20:>8.1f}Mi "
                  f"{least / 2**20:>8.1f}Mi {sent / least:>6.2f}")
        best = min(sent for mode, (_, sent, _) in rows.items() if mode != "auto")
        ratio = rows["auto"][1] / best
        verdicts.append(f"{'PASS' if ratio <= GOAL else 'FAIL'}  sp={sp}: the chosen plan sends {ratio:.3f}x "
                        f"the best forced plan (goal <= {GOAL})")
    print()
    print("\n".join(verdicts))


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
