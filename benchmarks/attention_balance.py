"""Step time of ring attention (zigzag, and contiguous blocks) against Ulysses on sp = 4 CPU ranks.

What is measured: a Llama-shaped model (`builtin:tiny-llama`'s architecture, 4 heads so that Ulysses
fits sp = 4; --hidden, --layers) compiled for sp = 4 three ways, each loaded on 4 gloo ranks (one
thread each) that run --steps training steps after --warmup: `attention="4x1"` (Ulysses),
`"1x4"` at S tokens (ring in zigzag order: rank i holds chunks i and 7 - i, equal causal work) and
`"1x4"` at S - 4 tokens (S - 4 does not cut into 8 chunks, so the ring keeps contiguous blocks and the
last rank does the most causal work). Every step starts with a barrier; a row shows the median over
steps of the slowest rank's step time, and the range of the ranks' own medians.

Goal (issue 11, PASS/FAIL): ring zigzag step time <= 1.1 x Ulysses'.
On a machine with fewer cores than ranks the ranks share cores, so the figures weigh total work
more than balance; os.cpu_count() is printed.

    python benchmarks/attention_balance.py
    python benchmarks/attention_balance.py --seq-len 4096 --hidden 128 --layers 2 --steps 8
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

import autosp
from autosp.frontend.tiny_llama import TinyLlamaConfig, TinyLlamaForCausalLM
from autosp.launch import spawn

GOAL = 1.1
SP = 4


def _config(a: argparse.Namespace) -> TinyLlamaConfig:
    return TinyLlamaConfig(hidden_size=a.hidden, intermediate_size=2 * a.hidden, num_hidden_layers=a.layers,
                           num_attention_heads=4, num_key_value_heads=2)


def _rank_times(path: str, state: dict, seq: int, steps: int, warmup: int) -> list[float]:
    """One rank: seconds of each timed step (forward + backward), each after a barrier."""
    import torch.distributed as dist
    m = autosp.load(path)
    m.load_state_dict(state, strict=False)
    ids = torch.randint(0, 256, (1, seq), generator=torch.Generator().manual_seed(0))
    times = []
    for step in range(warmup + steps):
        dist.barrier()
        t = time.perf_counter()
        m(ids, ids).backward()
        times.append(time.perf_counter() - t)
        m.zero_grad(set_to_none=True)
    return times[warmup:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seq-len", type=int, default=2048, help="tokens per sequence (a multiple of 8; default 2048)")
    p.add_argument("--hidden", type=int, default=64, help="hidden size (default 64)")
    p.add_argument("--layers", type=int, default=2, help="decoder layers (default 2)")
    p.add_argument("--steps", type=int, default=6, help="timed steps (default 6)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    a = p.parse_args()
    torch.manual_seed(0)
    model = TinyLlamaForCausalLM(_config(a))
    state = model.state_dict()
    tmp = tempfile.mkdtemp(prefix="autosp-balance-")
    rows = []
    for label, attention, seq in (("ulysses 4", "4x1", a.seq_len), ("ring 4, zigzag", "1x4", a.seq_len),
                                  ("ring 4, contiguous", "1x4", a.seq_len - SP)):
        ids = torch.zeros(1, seq, dtype=torch.long)
        path = os.path.join(tmp, f"{attention}-{seq}.autosp")
        autosp.compile(model, (ids, ids), sp=SP, attention=attention).save(path)
        per_rank = spawn(SP, _rank_times, path, state, seq, a.steps, a.warmup)
        slowest = statistics.median(max(ts) for ts in zip(*per_rank))
        medians = [statistics.median(ts) for ts in per_rank]
        rows.append((label, seq, slowest, min(medians), max(medians)))
    print(f"tiny-llama shape: hidden {a.hidden}, {a.layers} layers, 4 heads / 2 KV heads; sp={SP} gloo ranks, one "
          f"thread each, os.cpu_count() = {os.cpu_count()}; median of {a.steps} steps")
    print(f"{'attention':20s} {'S':>6s} {'step ms':>9s} {'rank medians ms':>18s} {'x ulysses':>10s}")
    base = rows[0][2]
    for label, seq, slowest, lo, hi in rows:
        print(f"{label:20s} {seq:>6d} {slowest * 1e3:>9.1f} {lo * 1e3:>8.1f}-{hi * 1e3:<8.1f} {slowest / base:>10.2f}")
    ratio = rows[1][2] / base
    print(f"{'PASS' if ratio <= GOAL else 'FAIL'}  ring zigzag step time {ratio:.2f} x Ulysses' (goal <= {GOAL})")


if __name__ == "__main__":
    main()
