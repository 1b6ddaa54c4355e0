"""CUDA-graph replay of the compiled step. The step is static (shapes, order, collectives), so on
CUDA the forward and the backward programs are captured once, as two CUDA graphs sharing one private
memory pool, and replayed at every later step: no per-op Python dispatch, one launch per program.

When (`autosp.load(..., cuda_graphs=True)`; per device and per placement of the parameters):
- the first step runs op by op: it makes the programs' first-run checks, loads the kernel objects,
  and creates NCCL communicators, cuBLAS workspaces and the dropout generator, all outside a capture;
- the second step captures: its inputs are copied into static buffers, the forward is captured, then
  the backward on the forward's outputs with a static incoming gradient, then the forward replays;
- every later step copies its inputs into the static buffers and replays.
A graph reads the addresses it was captured with: parameters and buffers must stay where they were
(an optimizer updates them in place, load_state_dict copies into them). When one moves (.to(),
`p.data = ...`, a repacked stacked group), that step runs op by op again and the next captures anew.

What replay changes for the caller, each kept exact:
- the loss is returned as a copy (the static one is overwritten by the next replay);
- the gradients reach autograd as views of the graph's static gradients, so .grad costs no second
  copy of the model. The backward graph, captured second into the pool, may keep them in memory the
  forward graph uses for its temporaries: before the forward replays again, a .grad that still is
  such a view (accumulation without zero_grad(set_to_none=True)) is first moved to a copy of its own.
  Any other reference kept to an earlier step's gradient sees it overwritten, as with any CUDA graph;
- a backward must follow its own forward: the saved values live in the pool, so the backward of an
  earlier forward, once a later one replayed, raises instead of using the later one's;
- the ranks' failure check of every run (collectives.Mesh.agree) runs after the replay, outside the
  graph, and a capture that fails on one rank fails on every rank."""
from __future__ import annotations

import logging
from typing import Any, Callable, Protocol

import torch

from .executor import Program, ProgramError, _line

log = logging.getLogger("autosp")


class Backend(Protocol):
    def capture(self, fn: Callable[[], list[torch.Tensor]], generators: list[torch.Generator]
                ) -> tuple[Callable[[], None], list[torch.Tensor]]:
        """Run fn once under capture: (replay, fn's outputs, which every replay rewrites in place)."""


class CudaGraphs:
    """torch.cuda's graphs, all captured on one stream into one private pool."""

    def __init__(self, device: torch.device):
        self.device = device
        self.pool = torch.cuda.graph_pool_handle()
        self.stream = torch.cuda.Stream(device)

    def capture(self, fn, generators):
        g = torch.cuda.CUDAGraph()
        for gen in generators:   # dropout's Philox offsets advance at every replay
            g.register_generator_state(gen)
        with torch.cuda.graph(g, pool=self.pool, stream=self.stream):
            outs = fn()
        return g.replay, outs   # fn, and with it every value only the capture held, is dropped


def cuda_backend(device: torch.device) -> Backend | None:
    return CudaGraphs(device) if device.type == "cuda" else None


class _Captured:
    """One placement's two graphs and the static tensors they read and write."""

    def __init__(self, inputs: list[torch.Tensor], loss: torch.Tensor, grad_loss: torch.Tensor,
                 grads: list[torch.Tensor], forward: Callable[[], None], backward: Callable[[], None]):
        self.inputs, self.loss, self.grad_loss, self.grads = inputs, loss, grad_loss, grads
        self.forward, self.backward = forward, backward


class Graphs:
    """The module's graphed steps. forward() gives (loss, ticket) or None where this step runs op by
    op; the step's backward(ticket, grad_loss) gives the gradients in the backward program's order."""

    def __init__(self, forward: Program, backward: Program,
                 backend: Callable[[torch.device], Backend | None] = cuda_backend):
        self.programs = forward, backward
        self.backend = backend
        self.key: tuple | None = None          # the placement the warm-up or the graphs are for
        self.graphs: Backend | None = None     # its backend (None: no graphs on its device)
        self.warm = [False, False]             # its op-by-op forward / backward ran
        self.captured: _Captured | None = None
        self.ticket = 0                        # bumped by every graphed forward and backward
        self.said = False

    def forward(self, fixed: list[torch.Tensor], inputs: list[torch.Tensor],
                grads_held: Callable[[], list[Any]]) -> tuple[torch.Tensor, int] | None:
        """fixed: the parameters and buffers as the programs take them; grads_held() gives, for each
        gradient of the backward program, the parameter whose .grad may be a view of it."""
        device = inputs[0].device
        key = (device, *(t.data_ptr() for t in fixed))
        if key != self.key:   # first step here, or the parameters moved: op by op, capture next
            self.key, self.warm, self.captured = key, [False, False], None
            self.graphs = self.backend(device)
            if self.graphs is None and not self.said:
                self.said = True
                log.warning("autosp: cuda_graphs=True needs a CUDA device, the step runs on %s: op by op",
                            device.type)
        if self.graphs is None or not all(self.warm):
            return None
        if self.captured is None:
            self.captured = self._capture(self.graphs, fixed, inputs)
        c = self.captured
        for p, g in zip(grads_held(), c.grads):   # accumulation: last step's .grad out of the pool's way
            if p.grad is not None and p.grad.untyped_storage().data_ptr() == g.untyped_storage().data_ptr():
                p.grad = p.grad.clone()
        for static, x in zip(c.inputs, inputs):
            static.copy_(x)
        c.forward()
        fwd = self.programs[0]
        fwd.mesh.agree(f"the end of the {fwd.name}", device)
        self.ticket += 1
        return c.loss.clone(), self.ticket

    def ran(self, program: int) -> None:
        """An op-by-op run of the forward (0) or the backward (1) finished at the current placement."""
        self.warm[program] = True

    def _capture(self, backend: Backend, fixed: list[torch.Tensor], inputs: list[torch.Tensor]) -> _Captured:
        fwd, bwd = self.programs
        device = inputs[0].device
        static_in = [x.clone() for x in inputs]
        try:
            replay_fwd, outs = backend.capture(lambda: fwd.run([*fixed, *static_in], together=False),
                                               fwd.generators())
            loss, grad_loss, saved = outs[0], torch.ones_like(outs[0]), outs[1:]

            def backward() -> list[torch.Tensor]:
                grads = bwd.run([*fixed, *static_in, *saved], together=False)
                return [g.mul_(grad_loss) for g in grads]   # of the loss itself: scaled by the incoming gradient
            # on CUDA only the backward closure held `saved` past this frame, and the backend drops it: the
            # backward graph's pool reuses each saved value's memory after its last reader
            replay_bwd, grads = backend.capture(backward, bwd.generators())
        except Exception as e:
            fwd.mesh.agree("the CUDA-graph capture", device, failed=True)
            raise ProgramError(f"the CUDA-graph capture of the step failed: {_line(e)} (load the artifact with "
                               "cuda_graphs=False to run it op by op)") from e
        fwd.mesh.agree("the CUDA-graph capture", device)
        return _Captured(static_in, loss, grad_loss, grads, replay_fwd, replay_bwd)

    def backward(self, ticket: int, grad_loss: torch.Tensor) -> list[torch.Tensor]:
        c = self.captured
        if c is None or ticket != self.ticket:
            raise ProgramError("the backward of a CUDA-graphed step must run before the next step's forward: the "
                               "saved values of this one were overwritten (or the parameters moved since)")
        c.grad_loss.copy_(grad_loss)
        c.backward()
        bwd = self.programs[1]
        bwd.mesh.agree(f"the end of the {bwd.name}", grad_loss.device)
        self.ticket += 1   # the saved values are spent
        return [g.detach() for g in c.grads]
