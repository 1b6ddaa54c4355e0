"""sp.halo on gloo ranks is the shift of the whole sequence cut to each rank's shard, in every sequence
order: the identity sp-elide-halo relies on when it shifts replicated labels without an exchange, and
what the runtime's halo must give when a shifted value is computed on the ranks. Integers: exact."""
from __future__ import annotations

import pytest
import torch

from autosp.launch import spawn
from autosp.runtime.collectives import Mesh

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
