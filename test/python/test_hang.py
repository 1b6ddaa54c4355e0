"""No silent hang: a stalled peer becomes an error within the process-group timeout, and a rank whose
step fails makes every rank fail that step, so the next step runs in lockstep (a notebook)."""
from __future__ import annotations

import time

import pytest
import torch

import autosp
from autosp.frontend import load_model
from autosp.launch import spawn
from autosp.runtime import kernels
from autosp.runtime.collectives import CollectiveError, PeerFailedError
from autosp.verify import batch_for

TIMEOUT_S = 2.0


@pytest.fixture(scope="module")
def sp2(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("hang") / "sp2.autosp")
    ids = torch.zeros(2, 16, dtype=torch.long)
    autosp.compile(load_model("builtin:tiny-llama", empty=True), (ids, ids), sp=2).save(path)
    return path


def _loaded(path: str):
    m = autosp.load(path, timeout_s=TIMEOUT_S)
    m.load_state_dict(load_model("builtin:tiny-llama").state_dict())
    return m, batch_for(256, m.input_shape, seed=0)


def _stall(path: str) -> tuple[str, float]:
    m, (ids, labels) = _loaded(path)
    if m.mesh.rank == 1:
        time.sleep(TIMEOUT_S + 2)   # stalls past the timeout before its first collective
        return "slept", 0.0
    t = time.perf_counter()
    try:
        m(ids, labels)
    except CollectiveError as e:
        return str(e), time.perf_counter() - t
    return "no error", time.perf_counter() - t


@pytest.mark.parametrize("shm", ["1", "0"], ids=["shared-memory", "gloo"])
def test_stalled_peer_is_an_error_within_the_timeout(sp2, shm, monkeypatch):
    monkeypatch.setenv("AUTOSP_SHM", shm)   # the ranks' transport (shm_collectives.py)
    (msg, elapsed), _ = spawn(2, _stall, sp2)
    assert "rank 0:" in msg and "got no answer from rank 1 (timeout 2 s)" in msg, msg
    assert ("shared-memory wait timed out" in msg) == (shm == "1"), msg   # the transport asked for
    assert msg.startswith("instruction ") and "(sp." in msg, msg       # the collective it waited in
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + 3, elapsed


def _fail_once_on_rank1(path: str) -> tuple[float, str, float, float]:
    """A clean forward, a step in which rank 1's attention raises (caught, as a notebook would), then
    the same forward again: every rank must fail the second and agree on the third."""
    m, (ids, labels) = _loaded(path)
    clean = m(ids, labels).item()
    attention = kernels.attention
    if m.mesh.rank == 1:
        def broken(*a):
            raise RuntimeError("injected failure")
        kernels.attention = broken
    t = time.perf_counter()
    try:
        m(ids, labels)
        msg = "no error"
    except (PeerFailedError, RuntimeError) as e:
        msg = f"{type(e).__name__}: {e}"
    elapsed = time.perf_counter() - t
    kernels.attention = attention
    return clean, msg, elapsed, m(ids, labels).item()


def test_failed_step_fails_every_rank_and_the_next_runs(sp2):
    r0, r1 = spawn(2, _fail_once_on_rank1, sp2)
    assert r1[1].startswith("ProgramError: instruction") and "injected failure" in r1[1], r1
    assert r0[1] == ("PeerFailedError: rank 0: stopped before the end of the forward program: "
                     "rank 1 failed this step"), r0
    assert r0[2] < TIMEOUT_S, r0      # told at the run's end, not by the timeout
    assert r0[3] == r0[0] and r1[3] == r1[0] and r0[0] == r1[0]   # the next step is the clean one
