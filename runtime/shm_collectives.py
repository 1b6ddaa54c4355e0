"""Collectives among the CPU ranks of one host, through shared memory.

Why: gloo makes every collective a sleeping rendezvous. A rank's thread blocks and the kernel wakes it
when its peers' bytes arrive: ~0.5-1 ms after compute on a small VM, for each of the dozen
collectives of a demo step (benchmarks/train_throughput.py). Ranks that share a host can instead
write to one shared segment and wait by spinning on its counters (yielding the core to any other
runnable thread), so a collective whose peers are already there costs microseconds. Where the host
runs more ranks than it has cores, a wait spins only briefly before it sleeps: there the peer it
waits for may be the thread it would keep off the core.

Where (collectives.Mesh opens a Channel per group at load, every member together): a group that
torch.distributed runs on gloo, whose members all map the same segment (one host: one /dev/shm),
on Linux x86-64, whose stores become visible in program order, so a counter published after a
message is never seen before the message. Elsewhere, for tensors off the CPU and for a message
larger than a slot, the group's calls go through torch.distributed (collectives.TorchTransport);
every member takes the same route for a call, the messages of a program being the same size on
every rank. AUTOSP_SHM=0 turns it off.

Protocol. Member m of n owns SLOTS slots of `capacity` bytes. Its k-th operation on the group (every
member runs the group's operations in the same order, as torch.distributed requires) writes its
message to slot k % SLOTS, then publishes k. A reader waits until the writer published k, copies
the pieces it needs out of the writer's slot, then marks k done. A writer reuses a slot once every
member has done every operation up to k - SLOTS: with two slots one operation may stay open while
the next runs (ring attention's backward passes dk / dv while its K / V pass is open). Reductions
add the members' messages in member order, so every member gets the same bits.

Failures. A wait looks at its peers every WATCH_S: a member whose lock (an flock it holds until its
process ends) is free has died; a wait longer than the timeout names the members that had not
published. The segment and the lock files are unlinked as soon as every member has opened them, so
nothing outlives the processes."""
from __future__ import annotations

import fcntl
import mmap
import os
import platform
import sys
import time
import uuid
import weakref
from typing import Callable

import torch
import torch.distributed as dist

SLOTS = 2
ALIGN = 64            # every piece of a message starts on a cache line (and on any dtype's alignment)
LINE = ALIGN // 8     # int64 words per cache line: member m's are at (m + 1) * LINE: published, done, and
FLAGS = 2             # from here a flag per slot (flags(): a message in the counters' line, no data)
SPIN_S = 0.01          # a wait spins this long, then sleeps SLEEP_S between looks; only
CROWDED_SPIN_S = 5e-5  # this long where the host's ranks outnumber its cores (a peer may need this one)
SLEEP_S = 2e-4
WATCH_S = 0.05        # how often a wait looks for dead peers and at the timeout
ROOT = "/dev/shm"


class Unanswered(Exception):
    """A wait gave up: `ranks` died (lost) or did not answer within the timeout."""

    def __init__(self, ranks: list[int], lost: bool):
        super().__init__(f"{'lost' if lost else 'no answer from'} ranks {ranks}")
        self.ranks, self.lost = ranks, lost


def available() -> bool:
    return (os.environ.get("AUTOSP_SHM", "1") != "0" and sys.platform == "linux"
            and platform.machine() in ("x86_64", "AMD64") and os.path.isdir(ROOT))


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def message_bytes(tensors: list[torch.Tensor]) -> int:
    """Its size in a slot: every piece aligned."""
    return sum(_aligned(t.numel() * t.element_size()) for t in tensors)


class Channel:
    """One group's shared segment, as seen by member `me` (global ranks `ranks`, in group order)."""

    def __init__(self, segment: mmap.mmap, ranks: list[int], me: int, capacity: int, locks: list[int],
                 timeout_s: float, spin_s: float):
        self.ranks, self.me, self.n, self.capacity = ranks, me, len(ranks), capacity
        self.ctl = memoryview(segment).cast("q")
        self.data = torch.frombuffer(segment, dtype=torch.uint8)
        self.typed: dict[torch.dtype, torch.Tensor] = {}   # the segment seen as each dtype (pieces are aligned)
        self.base = (self.n + 1) * ALIGN
        self.locks, self.timeout_s, self.spin_s = locks, timeout_s, spin_s
        weakref.finalize(self, _close, locks)   # this member's own lock too: a dropped channel is gone
        self.started = 0                  # operations this member started on the group
        self.finished: set[int] = set()   # done out of order, above the published done count

    # ------------------------------------------------------------------ the protocol
    def fits(self, message: list[torch.Tensor]) -> bool:
        return all(t.device.type == "cpu" for t in message) and message_bytes(message) <= self.capacity

    def _published(self, m: int) -> int:
        return self.ctl[(m + 1) * LINE]

    def _done(self, m: int) -> int:
        return self.ctl[(m + 1) * LINE + 1]

    def _piece(self, m: int, k: int, like: list[torch.Tensor], i: int) -> torch.Tensor:
        """Piece i of member m's message of operation k, laid out as `like`: a view into its slot."""
        t = like[i]
        at = self.base + (m * SLOTS + k % SLOTS) * self.capacity + message_bytes(like[:i])
        typed = self.typed.get(t.dtype)
        if typed is None:
            typed = self.typed[t.dtype] = self.data.view(t.dtype)
        return typed.narrow(0, at // t.element_size(), t.numel()).view(t.shape)

    def _start(self, message: list[torch.Tensor], flag: int = 0) -> int:
        k = self.started + 1
        self._wait(lambda: all(self._done(m) >= k - SLOTS for m in range(self.n)),
                   lambda: [m for m in range(self.n) if self._done(m) < k - SLOTS])
        for i, t in enumerate(message):
            self._piece(self.me, k, message, i).copy_(t)
        line = (self.me + 1) * LINE
        self.ctl[line + FLAGS + k % SLOTS] = flag
        self.started = k
        self.ctl[line] = k   # after the message: x86 keeps the stores in order
        return k

    def _await(self, m: int, k: int) -> None:
        """Until member m published its operation k."""
        self._wait(lambda: self._published(m) >= k, lambda: [m])

    def _read(self, m: int, k: int, like: list[torch.Tensor], i: int = 0) -> torch.Tensor:
        """Piece i of member m's message of operation k, once m published it."""
        self._await(m, k)
        return self._piece(m, k, like, i)

    def _finish(self, k: int) -> None:
        self.finished.add(k)
        done = self._done(self.me)
        while done + 1 in self.finished:
            done += 1
            self.finished.remove(done)
        self.ctl[(self.me + 1) * LINE + 1] = done

    def _wait(self, ready: Callable[[], bool], missing: Callable[[], list[int]]) -> None:
        if ready():
            return
        start = watched = time.monotonic()
        while not ready():
            now = time.monotonic()
            if now - watched >= WATCH_S:
                watched = now
                dead = [m for m in missing() if self._dead(m)]
                if dead:
                    raise Unanswered([self.ranks[m] for m in dead], lost=True)
                if now - start >= self.timeout_s:
                    raise Unanswered([self.ranks[m] for m in missing()], lost=False)
            if now - start < self.spin_s:
                os.sched_yield()
            else:
                time.sleep(SLEEP_S)

    def _dead(self, m: int) -> bool:
        try:
            fcntl.flock(self.locks[m], fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False   # its process still holds it
        fcntl.flock(self.locks[m], fcntl.LOCK_UN)
        return True

    # ------------------------------------------------------------------ the collectives (as collectives.TorchTransport's)
    def flags(self, flag: int) -> list[int]:
        """Every member's flag (the ranks' failure check), exchanged in the counters' lines alone."""
        k = self._start([], flag)
        flags = []
        for m in range(self.n):
            self._await(m, k)
            flags.append(self.ctl[(m + 1) * LINE + FLAGS + k % SLOTS])
        self._finish(k)
        return flags

    def all_reduce(self, x: torch.Tensor, op: str, in_place: bool = False) -> torch.Tensor:
        k = self._start([x])
        first = self._read(0, k, [x])   # member order: the same bits on every member
        acc = x.copy_(first) if in_place else first.clone()
        for m in range(1, self.n):
            piece = self._read(m, k, [x])
            if op == "max":
                torch.maximum(acc, piece, out=acc)
            else:
                acc += piece
        self._finish(k)
        return acc

    def all_to_all(self, chunks: list[torch.Tensor], gather_dim: int) -> torch.Tensor:
        k = self._start(chunks)
        out = torch.cat([self._read(m, k, chunks, self.me) for m in range(self.n)], gather_dim)
        self._finish(k)
        return out

    def all_gather(self, x: torch.Tensor) -> list[torch.Tensor]:
        k = self._start([x])
        parts = [self._read(m, k, [x]).clone() for m in range(self.n)]
        self._finish(k)
        return parts

    def reduce_scatter(self, parts: list[torch.Tensor]) -> torch.Tensor:
        k = self._start(parts)
        acc = self._read(0, k, parts, self.me).clone()
        for m in range(1, self.n):
            acc += self._read(m, k, parts, self.me)
        self._finish(k)
        return acc

    def isend_irecv(self, sends: list[torch.Tensor], to: int, source: int) -> Callable[[], list[torch.Tensor]]:
        """Send to global rank `to` (which reads it from this member's slot); wait() gives what `source` sent."""
        k, m = self._start(sends), self.ranks.index(source)

        def wait() -> list[torch.Tensor]:
            got = [self._read(m, k, sends, i).clone() for i in range(len(sends))]
            self._finish(k)
            return got
        return wait


def _agreed(ok: bool, group) -> bool:
    flag = torch.tensor([int(ok)], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)
    return bool(flag.item())


def open_channel(group, ranks: list[int], rank: int, capacity: int, timeout_s: float,
                 on_host: int) -> Channel | None:
    """Every member of the group calls this together (it exchanges over the group through gloo): the
    group's Channel, or None where some member cannot map the segment (another host, no room).
    on_host: how many ranks this host runs (at least the group's)."""
    me, n = ranks.index(rank), len(ranks)
    capacity = _aligned(capacity) + ALIGN * n   # a message of n pieces (all_to_all) aligns each
    size = (n + 1) * ALIGN + n * SLOTS * capacity
    names: list = [None, 0]
    segment = path = None
    if me == 0 and available():
        path, token = os.path.join(ROOT, f"autosp-{uuid.uuid4().hex}"), uuid.uuid4().int >> 65
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)   # room now, or an error (not a SIGBUS at a later write)
                segment = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            memoryview(segment).cast("q")[0] = token
            names = [path, token]
        except OSError:
            if os.path.exists(path):
                os.unlink(path)
            segment = None
    dist.broadcast_object_list(names, src=ranks[0], group=group)
    path, token = names
    own_lock = f"{path}-{me}.lock" if path else None
    lock: int | None = None
    locks: list[int] = []
    try:
        if me != 0 and path and available():
            fd = os.open(path, os.O_RDWR)
            try:
                if os.fstat(fd).st_size == size:
                    segment = mmap.mmap(fd, size)
            finally:
                os.close(fd)
            if segment is not None and memoryview(segment).cast("q")[0] != token:
                segment = None
        if segment is not None:
            lock = os.open(own_lock, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            fcntl.flock(lock, fcntl.LOCK_EX)   # held until this process ends: how peers tell it is alive
    except OSError:
        segment = None
    ok = _agreed(segment is not None, group)
    if ok:
        try:
            for m in range(n):
                locks.append(lock if m == me else os.open(f"{path}-{m}.lock", os.O_RDWR))
        except OSError:
            ok = False
        ok = _agreed(ok, group)   # every member opened everything: the names can go
    if own_lock and os.path.exists(own_lock):
        os.unlink(own_lock)
    if me == 0 and path:
        os.unlink(path)
    if not ok:
        _close({*locks, lock} - {None})
        return None
    spin_s = SPIN_S if max(on_host, n) <= (os.cpu_count() or 1) else CROWDED_SPIN_S
    return Channel(segment, ranks, me, capacity, locks, timeout_s, spin_s)


def _close(fds) -> None:
    for fd in fds:
        os.close(fd)
