"""The runtime's collectives on CPU ranks. sp.halo is the shift of the whole sequence cut to each
rank's shard, in every sequence order: the identity sp-elide-halo relies on when it shifts replicated
labels without an exchange. Through shared memory (shm_collectives.py) every collective gives what
gloo gives; a peer that dies is lost at once, and no name is left in /dev/shm. Integers: exact."""
from __future__ import annotations

import glob
import json
import os
import time

import pytest
import torch

from autosp.launch import LaunchError, spawn
from autosp.runtime import shm_collectives
from autosp.runtime.collectives import CollectiveError, Mesh

B, S = 2, 24


def _rank(p: int, order: str, ulysses: int, width: int) -> bool:
    mesh = Mesh(p, 1, order=order, ulysses=ulysses)
    x = torch.arange(B * S).view(B, S)
    shifted = torch.nn.functional.pad(x[:, width:], (0, width), value=-100)
    got = mesh.halo(mesh.shard_slice(x, 1, "sp"), 1, width, -100.0, "sp")
    return torch.equal(got, mesh.shard_slice(shifted, 1, "sp"))


@pytest.mark.parametrize("p,order,ulysses,width", [
    (2, "contiguous", 1, 1), (3, "contiguous", 1, 2), (3, "zigzag", 1, 1), (4, "zigzag", 2, 1)])
def test_halo_is_the_shift_of_the_whole(p, order, ulysses, width):
    assert spawn(p, _rank, p, order, ulysses, width) == [True] * p


def _affinity() -> set[int]:
    import os
    return os.sched_getaffinity(0)


def test_ranks_bound_to_cores_of_their_own(monkeypatch):
    """autospc train's ranks (launch.spawn): each on `threads` cores of its own where all fit, else on
    every core; a spawned rank runs with the cores _cores gives it."""
    from autosp import launch
    monkeypatch.setattr(launch.os, "sched_getaffinity", lambda pid: {0, 1, 4, 5})
    assert [launch._cores(r, 2, 2) for r in range(2)] == [{0, 1}, {4, 5}]
    assert [launch._cores(r, 4, 1) for r in range(4)] == [{0}, {1}, {4}, {5}]
    assert launch._cores(0, 3, 2) is None and launch._cores(0, 5, 1) is None
    monkeypatch.undo()
    assert spawn(1, _affinity) == [launch._cores(0, 1, 1)]


def _collectives(mesh: Mesh, x: torch.Tensor, big: torch.Tensor) -> list[torch.Tensor]:
    out = [mesh.all_reduce(x, "sum", "sp"), mesh.all_reduce(x, "max", "sp"), mesh.all_reduce(x, "avg", "world"),
           mesh.all_to_all(x, 1, 2, "sp"), mesh.all_gather(x, 1, "sp"), mesh.reduce_scatter(x, 1, "sp"),
           mesh.halo(x, 1, 1, -100.0, "sp")]
    kv = mesh.ring_pass([x, 2 * x], "ring", "sp")   # open while the next pass runs, as in ring attention's backward
    out += mesh.ring_pass([x + 1], "ring", "sp", shift=-1)()
    out += kv()
    return out + [mesh.all_reduce(big, "sum", "sp")]   # larger than a slot: through gloo


def _both_transports(p: int) -> tuple[list[bool], dict[str, int], list[str], set[float]]:
    shm, gloo = Mesh(p, 1, message_bytes=4096), Mesh(p, 1)
    g = torch.Generator().manual_seed(shm.rank)
    x = torch.randint(-50, 50, (2, 6 * p, 4), generator=g).float()   # integers: any order of a sum is exact
    big = torch.randint(-50, 50, (64, 64), generator=g).float()
    got, want = _collectives(shm, x, big), _collectives(gloo, x, big)
    return ([torch.equal(a, b) for a, b in zip(got, want)], {n: c.started for n, c in shm.channels.items()},
            glob.glob("/dev/shm/autosp-*"), {c.spin_s for c in shm.channels.values()})


@pytest.mark.parametrize("p", [2, 3])
def test_shared_memory_gives_what_gloo_gives(p):
    crowded = p > os.cpu_count()   # more ranks than cores: a wait barely spins before it sleeps
    for equal, started, left, spin in spawn(p, _both_transports, p):
        assert all(equal), equal
        assert started == {"world": 1, "sp": 8}, started   # each call but the large one went through it
        assert left == [], left
        assert spin == {shm_collectives.CROWDED_SPIN_S if crowded else shm_collectives.SPIN_S}, spin


def _peer_dies(path: str) -> None:
    mesh = Mesh(2, 1, timeout_s=60, message_bytes=4096)
    if mesh.rank == 1:
        os._exit(3)
    t = time.perf_counter()
    try:
        mesh.all_reduce(torch.ones(4), "sum", "sp")
        msg = "no error"
    except CollectiveError as e:
        msg = str(e)
    with open(path, "w") as f:
        json.dump([msg, time.perf_counter() - t], f)


def test_dead_peer_is_lost_at_once(tmp_path):
    """No timeout to wait out: a dead peer's lock is free."""
    path = str(tmp_path / "rank0.json")
    with pytest.raises(LaunchError, match="rank 1 .* exited with code 3"):
        spawn(2, _peer_dies, path)
    with open(path) as f:
        msg, elapsed = json.load(f)
    assert msg == "rank 0: sp.all_reduce over the sp group [0, 1] lost rank 1 (timeout 60 s): its process ended", msg
    assert elapsed < 1.0, elapsed
