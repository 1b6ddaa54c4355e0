"""`autospc train` / `demo`: train a compiled artifact on CPU ranks on the shipped corpus."""
from __future__ import annotations

import sys
import time

import torch

from autosp.data import VOCAB, ByteBatches
from autosp.frontend.sources import load_model, vocab_size


def optimizer(m, lr: float, zero: bool) -> torch.optim.Optimizer:
    """AdamW, or with `zero` AdamW inside ZeroRedundancyOptimizer: the module's gradients are already
    reduced over sp and dp (every rank holds the same .grad), so the states shard over all sp x dp
    ranks; each rank updates its shard and broadcasts the new parameters."""
    if not zero:
        return torch.optim.AdamW(m.parameters(), lr=lr)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(m.parameters(), optimizer_class=torch.optim.AdamW,
                                   process_group=m.mesh.groups["world"], lr=lr)


def train_rank(artifact: str, init: str, steps: int, lr: float, seed: int, zero: bool = False) -> list[float]:
    """One rank's training loop; rank 0 shows a progress bar and the loss of every step."""
    import torch.distributed as dist
    from tqdm import tqdm

    import autosp
    m = autosp.load(artifact)
    source = load_model(init, seed=seed)
    if vocab_size(source) < VOCAB:
        raise SystemExit(f"the byte-level corpus needs a vocabulary of >= {VOCAB}, {init} has {vocab_size(source)}")
    m.load_state_dict(source.state_dict())
    del source
    b, s = m.input_shape
    data = ByteBatches(b, s, seed=seed + m.mesh.index("dp"))   # each dp replica its own batches
    opt = optimizer(m, lr, zero)
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    losses = []
    bar = tqdm(range(steps), disable=not rank0 or not sys.stdout.isatty(), desc="train", file=sys.stdout, ncols=80)
    t0 = time.perf_counter()
    for step in bar:
        ids, labels = data.next()
        loss = m(ids, labels)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
        if rank0:
            bar.set_postfix(loss=f"{losses[-1]:.4f}")
            tqdm.write(f"step {step + 1:4d}/{steps}  loss {losses[-1]:.4f}", file=sys.stdout)
    if rank0:
        dt = time.perf_counter() - t0
        print(f"trained {steps} steps in {dt:.1f} s ({b * s * steps / dt:,.0f} tokens/s per SP group); "
              f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return losses


def train(artifact: str, init: str, nproc: int, steps: int, lr: float = 3e-3, seed: int = 0,
          zero: bool = False) -> list[float]:
    from .launch import init_from_env, spawn, under_torchrun
    if under_torchrun():
        init_from_env()
        return train_rank(artifact, init, steps, lr, seed, zero)
    if nproc == 1 and not zero:     # ZeroRedundancyOptimizer needs a process group, even of one rank
        return train_rank(artifact, init, steps, lr, seed)
    return spawn(nproc, train_rank, artifact, init, steps, lr, seed, zero)[0]
