"""Run a function on N CPU ranks with gloo, or join the process group torchrun set up.

Every process group gets a timeout (DEFAULT_TIMEOUT_S unless asked), so a stalled peer becomes an
error instead of gloo's 30-minute wait. A rank that fails or dies ends the run: the others get a
short grace period to fail on their own (their collectives see it), then they are killed, and the
caller gets one LaunchError naming the rank at the root of it (one that died, else one that failed
on its own rather than through a peer) and why."""
from __future__ import annotations

import datetime
import multiprocessing.connection
import os
import signal
import socket
import sys
import time
import traceback
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from autosp.runtime.collectives import DEFAULT_TIMEOUT_S, CollectiveError

GRACE_S = 5.0   # after a rank fails: time for the others to fail on their own before they are killed


class LaunchError(RuntimeError):
    """A rank failed or died: one line naming the rank and the cause."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def init_from_env(backend: str = "gloo", timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    if not dist.is_initialized():
        dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))


def user_errors() -> tuple[type[Exception], ...]:
    """Errors whose one line says it all (the user's input, the artifact, the data, a peer): the CLI
    prints them as `autospc: error: ...`, a rank reports them without a traceback."""
    from autosp.checkpoint import CheckpointError
    from autosp.data import DataError
    from autosp.frontend.errors import CompileError
    from autosp.runtime.artifact import ArtifactError
    return ArtifactError, CheckpointError, CollectiveError, CompileError, DataError, LaunchError


def _user_error(e: BaseException) -> bool:
    return isinstance(e, user_errors())


def _cores(rank: int, world: int, threads: int) -> set[int] | None:
    """The cores rank `rank` is bound to: its own `threads` of the cores this process may use, when
    every rank's threads fit on them (else None: the ranks share every core, as the OS schedules)."""
    cores = sorted(os.sched_getaffinity(0))
    if world * threads > len(cores):
        return None
    return set(cores[rank * threads:(rank + 1) * threads])


def _entry(rank: int, world: int, port: int, threads: int, timeout_s: float, fn: Callable, args: tuple,
           conn: multiprocessing.connection.Connection) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    # bound before torch's and gloo's threads exist, so they inherit it: a rank's threads then never
    # preempt another rank's compute, and every rendezvous wakes threads on the waiting rank's own core
    # (measured on 2 cores, demo model [4, 512] at sp=2: 21-22k tokens/s unbound, 26-29k bound)
    cores = _cores(rank, world, threads)
    if cores:
        os.sched_setaffinity(0, cores)
    # torch read OMP_NUM_THREADS when this process imported it (unpickling fn): set the pool itself
    torch.set_num_threads(threads)
    try:
        try:
            dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=timeout_s))
        except RuntimeError as e:   # DistStoreError: a peer did not come up in time
            raise CollectiveError(f"the process group of {world} ranks did not form within {timeout_s:g} s: "
                                  f"{str(e).splitlines()[0]}") from None
        conn.send(("ok", fn(*args)))
    except BaseException as e:
        if not _user_error(e):
            traceback.print_exc()
        conn.send(("error", f"{e}" if isinstance(e, SystemExit) else _one_line(e),
                   isinstance(e, CollectiveError)))
        conn.close()
        sys.stderr.flush()
        os._exit(1)   # not destroy_process_group: its peers may be gone or stalled
    conn.close()
    dist.destroy_process_group()


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split("\n")[0].split()) or type(e).__name__
    return text if _user_error(e) else f"{type(e).__name__}: {text}"


def spawn(nproc: int, fn: Callable, *args: Any, threads: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Any]:
    """fn(*args) on nproc local ranks (picklable fn), each with `threads` intra-op threads (one by
    default), bound to cores of its own where nproc x threads fit (_cores), and a process-group timeout of timeout_s; returns
    every rank's result, by rank, or raises LaunchError naming the failed rank at the root of it."""
    ctx = mp.get_context("spawn")
    port = _free_port()
    procs, conns = [], []
    for rank in range(nproc):
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_entry, args=(rank, nproc, port, threads, timeout_s, fn, args, send), daemon=True)
        p.start()
        send.close()
        procs.append(p)
        conns.append(recv)
    results: dict[int, tuple] = {}
    deadline = None   # set when a rank fails: the others' grace period ends then
    try:
        while len(results) < nproc:
            waiting = {c: r for r, c in enumerate(conns) if r not in results}
            ready = multiprocessing.connection.wait(
                list(waiting) + [p.sentinel for r, p in enumerate(procs) if r not in results],
                timeout=None if deadline is None else max(deadline - time.monotonic(), 0))
            if not ready:   # the grace period is over
                break
            for obj in ready:
                if obj in waiting:
                    r = waiting[obj]
                    try:
                        results[r] = obj.recv()
                    except EOFError:   # died without a word: its exit code says why
                        procs[r].join()
                        results[r] = ("died", procs[r].exitcode)
                else:
                    r = next(i for i, p in enumerate(procs) if p.sentinel == obj)
                    if r not in results and not conns[r].poll():
                        procs[r].join()
                        results[r] = ("died", procs[r].exitcode)
            if deadline is None and any(res[0] != "ok" for res in results.values()):
                deadline = time.monotonic() + GRACE_S
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
            p.join()
    if deadline is None:
        return [results[r][1] for r in range(nproc)]
    raise LaunchError(_cause(results, procs))


def _cause(results: dict[int, tuple], procs: list) -> str:
    """The root cause: a rank that died, else one that failed on its own, else one that saw a peer
    fail (lowest rank first)."""
    def rank_of(r: int) -> tuple[int, int]:
        res = results[r]
        return (0 if res[0] == "died" else 2 if res[-1] is True else 1), r
    r = min((r for r in results if results[r][0] != "ok"), key=rank_of)
    res = results[r]
    if res[0] == "error":
        return f"rank {r}: {res[1]}"
    code = res[1]
    if code is not None and code < 0:
        return f"rank {r} (pid {procs[r].pid}) was killed by {signal.Signals(-code).name}"
    return f"rank {r} (pid {procs[r].pid}) exited with code {code} without a result"
