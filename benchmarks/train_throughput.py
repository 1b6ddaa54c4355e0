"""`autospc train --nproc 2` against two single-threaded ranks working alone, on the demo model.

What is measured: tokens/s of `autospc train`, as it logs them per step (--log FILE.jsonl), for the
demo model (`builtin:tiny-llama`, the demo's [batch, seq] = [4, 128] by default):
- sp=2: the artifact compiled for sp=2, `autospc train --nproc 2` (one thread per rank, the
  default): one SP group, each rank holding half of every sequence;
- sp=1: the artifact compiled for sp=1, `autospc train --nproc 1 --threads 1`: one rank alone.
Two independent single-threaded ranks would do 2 x the sp=1 tokens/s; sequence parallelism on 2
ranks adds collectives, the per-collective failure check and the per-rank share of the replicated
work (embedding and head on the local shard only, but every op's Python dispatch on every rank).
Both runs use the same data, seed and step count and are timed in this one script, one after the
other; each side's figure is the median of its per-step tokens/s after --warmup steps.

Goal (PASS/FAIL line): 2 x sp=1 tokens/s <= 1.5 x sp=2 tokens/s.

    python benchmarks/train_throughput.py
    python benchmarks/train_throughput.py --steps 30 --seq-len 256 --batch 4
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

GOAL = 1.5


def autospc(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "autosp.cli.autospc", *args], check=True, stdout=subprocess.DEVNULL)


def tokens_per_s(log: str, warmup: int) -> float:
    with open(log) as f:
        rows = [json.loads(line) for line in f]
    return statistics.median(r["tokens_per_s"] for r in rows[warmup:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="autosp-train-bench-")
    rates = {}
    for sp in (1, 2):
        art = os.path.join(tmp, f"sp{sp}.autosp")
        autospc("compile", "builtin:tiny-llama", "--seq-len", str(a.seq_len), "--batch", str(a.batch),
                "--sp", str(sp), "-o", art)
        log = os.path.join(tmp, f"sp{sp}.jsonl")
        autospc("train", art, "--nproc", str(sp), "--threads", "1", "--steps", str(a.steps), "--log", log)
        rates[sp] = tokens_per_s(log, a.warmup)
    ratio = 2 * rates[1] / rates[2]
    print(f"builtin:tiny-llama [{a.batch}, {a.seq_len}], {a.steps} steps, median after {a.warmup} "
          f"(os.cpu_count() = {os.cpu_count()})")
    print(f"{'run':44s} {'tokens/s':>10s}")
    print(f"{'autospc train --nproc 2 (sp=2, 1 thread/rank)':44s} {rates[2]:10,.0f}")
    print(f"{'one rank, sp=1, 1 thread':44s} {rates[1]:10,.0f}")
    print(f"{'2 x one rank':44s} {2 * rates[1]:10,.0f}")
    print(f"{'PASS' if ratio <= GOAL else 'FAIL'}: 2 x one rank / sp=2 = {ratio:.2f} (goal <= {GOAL})")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
