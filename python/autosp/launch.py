"""Run a function on N CPU ranks with gloo, or join the process group torchrun set up."""
from __future__ import annotations

import os
import socket
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_from_env(backend: str = "gloo") -> None:
    if not dist.is_initialized():
        dist.init_process_group(backend)


def _entry(rank: int, world: int, port: int, threads: int, fn: Callable, args: tuple, queue) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    # torch read OMP_NUM_THREADS when this process imported it (unpickling fn): set the pool itself
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = fn(*args)
        queue.put((rank, result))
    finally:
        dist.destroy_process_group()


def spawn(nproc: int, fn: Callable, *args: Any, threads: int = 1) -> list[Any]:
    """fn(*args) on nproc local ranks (picklable fn), each with `threads` intra-op threads (one by
    default: ranks share the machine's cores); returns every rank's result, by rank."""
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    mp.start_processes(_entry, args=(nproc, _free_port(), threads, fn, args, queue), nprocs=nproc, join=True,
                       start_method="spawn")
    results = dict(queue.get() for _ in range(nproc))
    return [results[r] for r in range(nproc)]
