"""`autospc train` / `demo`: train a compiled artifact on CPU ranks (spawned, or under torchrun).

Each step logs its loss and tokens/s (of the whole job: every SP group's tokens), optionally to a
CSV or JSONL file; checkpoints (safetensors + JSON, see checkpoint.py) resume bit-identically."""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

import torch

from autosp.data import Tokenizer, TokenBatches, read_tokens
from autosp.frontend.sources import load_model, vocab_size
from autosp.runtime.collectives import DEFAULT_TIMEOUT_S


def optimizer(m, lr: float, zero: bool) -> torch.optim.Optimizer:
    """AdamW (fused: one kernel for all parameters instead of ~10 ops each, ~0.4 ms less of a ~10 ms
    demo step on one CPU rank), or with `zero` AdamW inside ZeroRedundancyOptimizer: the module's
    gradients are already reduced over sp and dp (every rank holds the same .grad), so the states
    shard over all sp x dp ranks; each rank updates its shard and broadcasts the new parameters."""
    if not zero:
        return torch.optim.AdamW(m.parameters(), lr=lr, fused=True)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(m.parameters(), optimizer_class=torch.optim.AdamW,
                                   process_group=m.mesh.groups["world"], lr=lr, fused=True)


@dataclass
class TrainOptions:
    steps: int = 20
    lr: float = 3e-3
    seed: int = 0
    data: str | None = None              # text file, tokenized .bin, datasets directory; None: the shipped corpus
    tokenizer: str = "byte"
    bin_dtype: str = "uint16"
    checkpoint: str | None = None        # directory to write checkpoints to
    save_every: int = 0                  # steps between checkpoints (0: only at the end, if checkpoint is set)
    resume: str | None = None            # directory to resume from
    log: str | None = None               # .csv or .jsonl: one row per step
    threads: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    zero: bool = False                   # AdamW's states sharded over all ranks (ZeroRedundancyOptimizer)


class _StepLog:
    """Rank 0's per-step rows: printed, and appended to a CSV or JSONL file."""
    FIELDS = ("step", "loss", "tokens_per_s", "seconds")

    def __init__(self, path: str | None, resumed: bool):
        self.f = None
        self.csv = bool(path) and path.endswith(".csv")
        if path:
            fresh = not resumed or not os.path.exists(path)
            self.f = open(path, "w" if fresh else "a", encoding="utf-8")
            if self.csv and fresh:
                self.f.write(",".join(self.FIELDS) + "\n")

    def row(self, **row) -> None:
        if self.f is None:
            return
        self.f.write(",".join(repr(row[k]) for k in self.FIELDS) + "\n" if self.csv else json.dumps(row) + "\n")
        self.f.flush()

    def close(self) -> None:
        if self.f is not None:
            self.f.close()


def train_rank(artifact: str, init: str, o: TrainOptions) -> list[float]:
    """One rank's training loop; rank 0 prints the loss and tokens/s of every step."""
    import threading

    import torch.distributed as dist
    from tqdm import tqdm

    import autosp
    from autosp import checkpoint
    tqdm.set_lock(threading.RLock())   # not tqdm's default multiprocessing lock: a rank's semaphores leak when it dies
    m = autosp.load(artifact, timeout_s=o.timeout_s)
    source = load_model(init, seed=o.seed)
    tok = Tokenizer(o.tokenizer)
    vocab = vocab_size(source)
    m.load_state_dict(source.state_dict())
    del source
    b, s = m.input_shape
    data = TokenBatches(read_tokens(o.data, tok, o.bin_dtype), b, s, seed=o.seed + m.mesh.index("dp"), vocab=vocab)
    opt = optimizer(m, o.lr, o.zero)
    losses: list[float] = []
    if o.resume:
        meta, state = checkpoint.load(o.resume, m, opt)
        torch.set_rng_state(state.pop("torch"))
        data.set_state(state.pop("data"))
        m.set_rng_state({k.removeprefix("module."): v for k, v in state.items()})
        losses = list(meta["losses"])
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    world = dist.get_world_size() if dist.is_initialized() else 1
    tokens_per_step = b * s * m.mesh.dp   # each dp replica its own batch; an SP group shares one
    log = _StepLog(o.log if rank0 else None, resumed=bool(o.resume))
    start = len(losses)
    bar = tqdm(range(start, o.steps), disable=not rank0 or not sys.stdout.isatty(), desc="train",
               file=sys.stdout, ncols=80)
    t0 = time.perf_counter()
    for step in bar:
        t = time.perf_counter()
        ids, labels = data.next()
        loss = m(ids, labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        dt = time.perf_counter() - t
        if rank0:
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            tqdm.write(f"step {step + 1:4d}/{o.steps}  loss {losses[-1]:.4f}  {tokens_per_step / dt:8,.0f} tokens/s",
                       file=sys.stdout)
            log.row(step=step + 1, loss=losses[-1], tokens_per_s=tokens_per_step / dt, seconds=dt)
        if o.checkpoint and (step + 1 == o.steps or (o.save_every and (step + 1) % o.save_every == 0)):
            state = {"torch": torch.get_rng_state(), "data": data.state(),
                     **{f"module.{k}": v for k, v in m.rng_state().items()}}
            d = checkpoint.save(o.checkpoint, step + 1, m, opt, state, {"losses": losses, "artifact": artifact})
            if rank0:
                tqdm.write(f"saved {d}", file=sys.stdout)
    log.close()
    if rank0 and o.steps > start:
        dt = time.perf_counter() - t0
        print(f"trained {o.steps - start} steps in {dt:.1f} s ({tokens_per_step * (o.steps - start) / dt:,.0f} "
              f"tokens/s on {world} rank{'s' if world > 1 else ''}); loss {losses[start]:.4f} -> {losses[-1]:.4f}")
    return losses


def train(artifact: str, init: str, nproc: int, options: TrainOptions | None = None) -> list[float]:
    from .launch import init_from_env, spawn, under_torchrun
    o = options or TrainOptions()
    if under_torchrun():
        torch.set_num_threads(o.threads)
        init_from_env(timeout_s=o.timeout_s)
        return train_rank(artifact, init, o)
    if nproc == 1 and not o.zero:     # ZeroRedundancyOptimizer needs a process group, even of one rank
        torch.set_num_threads(o.threads)
        return train_rank(artifact, init, o)
    return spawn(nproc, train_rank, artifact, init, o, threads=o.threads, timeout_s=o.timeout_s)[0]
