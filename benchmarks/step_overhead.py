"""Step time of the compiled module against the eager model, on one CPU rank (sp = 1).

What is measured: one training step, `loss = f(input_ids, labels); loss.backward()`, for the eager
model (`f = model`) and for the autosp-compiled module (`f = autosp.load(autosp.compile(model,
..., sp=1).save(...))`, no process group). Both hold identical weights (the compiled module is
given `model.state_dict()`), and the script checks that they agree on the loss and the gradients
before timing. The model is `builtin:tiny-llama`, or a bigger config of the same architecture with
`--layers/--hidden/--intermediate/--heads/--kv-heads/--vocab`.

The two are timed side by side in one process, interleaved: after warmup, each iteration runs
one eager step and one compiled step (the order alternates every iteration), gradients are reset
to None outside the timed region, and the table reports the median of `--iters` iterations for
each, at each (batch, seq) size. Threads: torch.set_num_threads(--threads), 1 by default, so the
comparison is of the work each side issues, not of how well it parallelizes.

Goal (PASS/FAIL line): compiled / eager median step time <= 1.3 at every size.

    python benchmarks/step_overhead.py
    python benchmarks/step_overhead.py --sizes 1x256,2x512,4x1024 --iters 30
    python benchmarks/step_overhead.py --layers 4 --hidden 256 --intermediate 768 --heads 8 --kv-heads 4
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Callable

import torch
import torch.nn as nn

import autosp
from autosp.frontend.tiny_llama import TinyLlamaConfig, TinyLlamaForCausalLM

GOAL_RATIO = 1.3


def build_model(args: argparse.Namespace) -> nn.Module:
    """builtin:tiny-llama, with any of its config fields overridden from the command line."""
    overrides = {field: getattr(args, arg) for field, arg in (
        ("num_hidden_layers", "layers"), ("hidden_size", "hidden"), ("intermediate_size", "intermediate"),
        ("num_attention_heads", "heads"), ("num_key_value_heads", "kv_heads"), ("vocab_size", "vocab"))
        if getattr(args, arg) is not None}
    torch.manual_seed(args.seed)
    return TinyLlamaForCausalLM(TinyLlamaConfig(**overrides))


def compile_module(model: nn.Module, batch: int, seq: int, workdir: str, remat: str) -> nn.Module:
    """Compile `model` for [batch, seq] at sp=1, save, load, and give it the model's weights."""
    ids = torch.zeros(batch, seq, dtype=torch.long)
    art = autosp.compile(model, example_inputs=(ids, ids.clone()), sp=1, remat=remat)
    m = autosp.load(art.save(f"{workdir}/step_{batch}x{seq}.autosp"))
    m.load_state_dict(model.state_dict())
    return m


def step(f: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    loss = f(ids, labels)
    loss.backward()
    return loss


def check_agreement(model: nn.Module, m: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> float:
    """One step on each; raises if loss or gradients differ; returns the max gradient rel. error."""
    model.zero_grad(set_to_none=True)
    m.zero_grad(set_to_none=True)
    le, lc = step(model, ids, labels), step(m, ids, labels)
    if not torch.allclose(le, lc, rtol=1e-5, atol=1e-6):
        raise SystemExit(f"compiled loss {lc.item()} != eager loss {le.item()}")
    compiled = dict(m.named_parameters(remove_duplicate=False))
    worst = 0.0
    for name, p in model.named_parameters():
        g, h = p.grad, compiled[name].grad
        if g is None or h is None:
            raise SystemExit(f"{name}: eager grad {'set' if g is not None else 'None'}, "
                             f"compiled grad {'set' if h is not None else 'None'}")
        worst = max(worst, ((g - h).abs().max() / g.abs().max().clamp_min(1e-12)).item())
    if worst > 1e-4:
        raise SystemExit(f"compiled gradients differ from eager: max relative error {worst:.2e}")
    return worst


def timed(f: nn.Module, ids: torch.Tensor, labels: torch.Tensor) -> float:
    f.zero_grad(set_to_none=True)
    t = time.perf_counter()
    step(f, ids, labels)
    return time.perf_counter() - t


def measure(model: nn.Module, m: nn.Module, ids: torch.Tensor, labels: torch.Tensor,
            warmup: int, iters: int) -> tuple[float, float]:
    """Median eager and compiled step times in seconds, interleaved, alternating who goes first."""
    for _ in range(warmup):
        timed(model, ids, labels)
        timed(m, ids, labels)
    eager: list[float] = []
    compiled: list[float] = []
    runs: list[tuple[Callable[[], float], list[float]]] = [(lambda: timed(model, ids, labels), eager),
                                                            (lambda: timed(m, ids, labels), compiled)]
    for i in range(iters):
        for run, out in (runs if i % 2 == 0 else runs[::-1]):
            out.append(run())
    return statistics.median(eager), statistics.median(compiled)


def parse_sizes(text: str) -> list[tuple[int, int]]:
    sizes = []
    for item in text.split(","):
        b, _, s = item.partition("x")
        sizes.append((int(b), int(s)))
    return sizes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1x256,2x512,4x1024", help="comma-separated BATCHxSEQ (default 1x256,2x512,4x1024)")
    p.add_argument("--iters", type=int, default=30, help="timed iterations per side and size (default 30)")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations per side first (default 3)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--remat", default="none", choices=["none", "sac", "full"],
                   help="remat policy (default none: eager saves everything too, so the ratio is the "
                        "runtime's own overhead; sac/full add their recompute)")
    p.add_argument("--layers", type=int, default=None, help="num_hidden_layers (tiny-llama: 2)")
    p.add_argument("--hidden", type=int, default=None, help="hidden_size (tiny-llama: 64)")
    p.add_argument("--intermediate", type=int, default=None, help="intermediate_size (tiny-llama: 128)")
    p.add_argument("--heads", type=int, default=None, help="num_attention_heads (tiny-llama: 4)")
    p.add_argument("--kv-heads", type=int, default=None, help="num_key_value_heads (tiny-llama: 2)")
    p.add_argument("--vocab", type=int, default=None, help="vocab_size (tiny-llama: 256)")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    model = build_model(args)
    c = model.config
    n_params = sum(p.numel() for p in model.parameters())
    print(f"tiny-llama: {c.num_hidden_layers} layers, hidden {c.hidden_size}, intermediate {c.intermediate_size}, "
          f"heads {c.num_attention_heads}/{c.num_key_value_heads}, vocab {c.vocab_size}, {n_params / 1e6:.2f} M params; "
          f"sp=1 on CPU, remat {args.remat}, {torch.get_num_threads()} thread(s), median of {args.iters} interleaved iterations "
          f"after {args.warmup} warmup; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    head = f"{'batch x seq':>12} {'ops':>6} {'eager ms':>10} {'compiled ms':>12} {'ratio':>7} {'max grad err':>13}"
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        for batch, seq in parse_sizes(args.sizes):
            m = compile_module(model, batch, seq, workdir, args.remat)
            gen = torch.Generator().manual_seed(args.seed)
            ids = torch.randint(0, c.vocab_size, (batch, seq), generator=gen)
            labels = torch.randint(0, c.vocab_size, (batch, seq), generator=gen)
            err = check_agreement(model, m, ids, labels)
            eager, compiled = measure(model, m, ids, labels, args.warmup, args.iters)
            ops = sum(len(p["instructions"]) for p in m.artifact.program["programs"].values())
            rows.append((batch, seq, ops, eager, compiled, err))
            print(f"  {batch}x{seq}: eager {eager * 1e3:.2f} ms, compiled {compiled * 1e3:.2f} ms", flush=True)
    print()
    print(head)
    print("-" * len(head))
    for batch, seq, ops, eager, compiled, err in rows:
        print(f"{f'{batch}x{seq}':>12} {ops:>6} {eager * 1e3:>10.2f} {compiled * 1e3:>12.2f} "
              f"{compiled / eager:>6.2f}x {err:>13.1e}")
    worst = max(r[4] / r[3] for r in rows)
    print(f"{'PASS' if worst <= GOAL_RATIO else 'FAIL'}  worst compiled/eager step time {worst:.2f}x "
          f"(goal <= {GOAL_RATIO}x)")


if __name__ == "__main__":
    main()
