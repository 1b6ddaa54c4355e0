"""CUDA-graph replay (runtime/graphs.py) without a GPU: a stand-in backend whose capture runs the
function once, as a capture does, and whose replay runs it again and writes its results into the
tensors the capture returned, as a replay does. So every step after the capture reads only the
static inputs and writes only the static outputs, as on CUDA, and its numerics must be bit-identical
to the op-by-op step's (the same ATen ops on the same values): inputs copied in, the loss copied out,
gradients handed to autograd and accumulated, the dropout generator's state around the capture, a
recapture when the parameters move, and the ranks' failure check after each replay."""
from __future__ import annotations

import logging

import pytest
import torch

import autosp
from autosp.frontend import load_model
from autosp.launch import spawn
from autosp.runtime.executor import ProgramError
from autosp.runtime.graphs import Graphs
from autosp.verify import batch_for

SPEC = "builtin:tiny-llama"
DROPOUT = "py:models:dropout_model"


class Rerun:
    """CUDA graphs' contract on CPU. Like torch.cuda.graph with registered generators, a capture
    leaves the generators as it found them and every replay draws from them anew. Graphs captured into
    one pool share its memory: a later capture may take what an earlier graph frees inside itself, so
    a replay may overwrite the outputs of every graph captured after it (here: with NaN)."""

    def __init__(self, device: torch.device, fail: bool = False):
        self.captures, self.replays, self.fail = 0, 0, fail
        self.outputs: list[list[torch.Tensor]] = []   # of each capture, in order

    def capture(self, fn, generators):
        if self.fail:
            raise RuntimeError("operation not permitted when stream is capturing")
        states = [g.get_state() for g in generators]
        outs = fn()
        for g, s in zip(generators, states):
            g.set_state(s)
        self.captures += 1
        self.outputs.append(outs)
        index = len(self.outputs) - 1

        def replay() -> None:
            self.replays += 1
            for o in (o for later in self.outputs[index + 1:] for o in later if o.is_floating_point()):
                o.fill_(float("nan"))
            for o, r in zip(outs, fn()):
                o.copy_(r)
        return replay, outs


def _graphed(m, **kw) -> list[Rerun]:
    """Give m graphs over the stand-in; the list collects the backends it makes (one per placement)."""
    made: list[Rerun] = []

    def backend(device):
        made.append(Rerun(device, **kw))
        return made[-1]
    m.graphs = Graphs(m.forward_program, m.backward_program, backend)
    return made


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("graphs")
    out = {}
    for spec, sp in ((SPEC, 1), (DROPOUT, 1), (SPEC, 2)):
        model = load_model(spec, empty=True)
        ids = torch.zeros(2, 16, dtype=torch.long)
        out[f"{spec}/{sp}"] = autosp.compile(model, (ids, ids), sp=sp, model_name=spec).save(
            str(root / f"{spec.replace(':', '-')}-sp{sp}.autosp"))
    return out


def _loaded(path: str, spec: str):
    m = autosp.load(path)
    m.load_state_dict(load_model(spec).state_dict())
    return m


def _train(m, steps: int, zero: tuple[bool, ...] = ()) -> tuple[list[torch.Tensor], dict, dict]:
    """(the loss tensors each step returned, the last .grad, the parameters) after AdamW steps from seed 0;
    zero[i]: .grad set to None before step i (default: every step)."""
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    torch.manual_seed(0)
    losses = []
    for step in range(steps):
        ids, labels = batch_for(64, m.input_shape, seed=step)
        if zero[step] if zero else True:
            m.zero_grad(set_to_none=True)
        loss = m(ids, labels)
        loss.backward()
        losses.append(loss)
        opt.step()
    return losses, {n: p.grad.clone() for n, p in m.named_parameters()}, \
        {n: p.detach().clone() for n, p in m.named_parameters()}


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for n in a:
        assert torch.equal(a[n], b[n]), (n, (a[n] - b[n]).abs().max().item())


@pytest.mark.in_process
@pytest.mark.parametrize("spec", [SPEC, DROPOUT])
def test_replayed_steps_are_the_op_by_op_steps(artifacts, spec):
    path = artifacts[f"{spec}/1"]
    want = _train(_loaded(path, spec), 4)
    m = _loaded(path, spec)
    made = _graphed(m)
    got = _train(m, 4)
    # step 1 op by op, step 2 captured then replayed, steps 3 and 4 replayed: each loss is its own
    # tensor (a later replay does not overwrite it)
    assert len(made) == 1 and made[0].captures == 2 and made[0].replays == 6, made
    assert all(torch.equal(a, b) for a, b in zip(got[0], want[0])), (got[0], want[0])
    _same(got[1], want[1])
    _same(got[2], want[2])


@pytest.mark.in_process
def test_accumulation_without_zero_grad(artifacts):
    """A .grad that a replayed backward set (after zero_grad) is a view of the graph's gradients: kept
    into the next steps, it must be moved out of the way before the next forward replays (which may
    reuse that memory) and the backward writes the new gradients there."""
    path, zero = artifacts[f"{SPEC}/1"], (True, True, False, False)
    want = _train(_loaded(path, SPEC), 4, zero)
    m = _loaded(path, SPEC)
    _graphed(m)
    got = _train(m, 4, zero)
    _same(got[1], want[1])
    _same(got[2], want[2])


def test_a_backward_follows_its_own_forward(artifacts):
    m = _loaded(artifacts[f"{SPEC}/1"], SPEC)
    _graphed(m)
    _train(m, 2)
    ids, labels = batch_for(64, m.input_shape, seed=5)
    first = m(ids, labels)
    m(ids, labels)
    with pytest.raises(ProgramError, match="the backward of a CUDA-graphed step must run before the next step's "
                                           "forward"):
        first.backward()


@pytest.mark.in_process
def test_moved_parameters_are_captured_again(artifacts):
    path = artifacts[f"{SPEC}/1"]
    m = _loaded(path, SPEC)
    made = _graphed(m)
    _train(m, 2)
    p = m.get_parameter("lm_head.weight")
    p.data = p.data.clone()          # new address: the graphs read the old one
    ids, labels = batch_for(64, m.input_shape, seed=7)
    ref = _loaded(path, SPEC)
    ref.load_state_dict(m.state_dict())
    for _ in range(2):               # op by op, then captured again
        m.zero_grad(set_to_none=True)
        ref.zero_grad(set_to_none=True)
        loss, want = m(ids, labels), ref(ids, labels)
        loss.backward()
        want.backward()
        assert torch.equal(loss, want)
        _same({n: q.grad for n, q in m.named_parameters()}, {n: q.grad for n, q in ref.named_parameters()})
    assert len(made) == 2 and made[1].captures == 2, made


def test_a_failed_capture_is_one_error(artifacts):
    m = _loaded(artifacts[f"{SPEC}/1"], SPEC)
    _graphed(m, fail=True)
    _train(m, 1)
    ids, labels = batch_for(64, m.input_shape, seed=1)
    with pytest.raises(ProgramError, match=r"^the CUDA-graph capture of the step failed: operation not permitted "
                                           r"when stream is capturing \(load the artifact with cuda_graphs=False"):
        m(ids, labels)


def test_off_cuda_the_step_runs_op_by_op_and_says_so(artifacts, caplog):
    path = artifacts[f"{SPEC}/1"]
    m = autosp.load(path, cuda_graphs=True)
    m.load_state_dict(load_model(SPEC).state_dict())
    with caplog.at_level(logging.WARNING, logger="autosp"):
        got = _train(m, 2)
    assert [r.getMessage() for r in caplog.records].count(
        "autosp: cuda_graphs=True needs a CUDA device, the step runs on cpu: op by op") == 1
    _same(got[2], _train(_loaded(path, SPEC), 2)[2])


def _two_ranks(path: str) -> tuple[list[float], list[float], int]:
    ref = _loaded(path, SPEC)
    want = [x.item() for x in _train(ref, 3)[0]]
    m = _loaded(path, SPEC)
    made = _graphed(m)
    got = [x.item() for x in _train(m, 3)[0]]
    return got, want, made[0].replays


def test_replay_on_two_ranks(artifacts):
    """sp=2: collectives inside the replayed programs, the failure check after each replay."""
    for got, want, replays in spawn(2, _two_ranks, artifacts[f"{SPEC}/2"]):
        assert got == want and replays == 4, (got, want, replays)
