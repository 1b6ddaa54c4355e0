"""The compiled step as an nn.Module with the source model's parameter names.

loss = m(input_ids, labels) runs the forward program, which returns the loss and what the backward
needs (as sp-plan-remat chose); loss.backward() runs the backward program and hands the
already-reduced gradients to autograd, so .grad accumulates as usual and any torch optimizer,
torch.save(m.state_dict()) and DDP-style loops work unchanged."""
from __future__ import annotations

import torch
import torch.nn as nn

from .artifact import DTYPES, Artifact, ArtifactError, read
from .collectives import Mesh
from .executor import Program
from .memory import LiveBytes, resident_bytes


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module: "CompiledModule", input_ids, labels, *params):
        args = module.arguments(params, input_ids, labels)
        memory = module._start_measuring(params) if module.measure_memory else None
        loss, *saved = module.forward_program.run(list(args), memory)
        ctx.module, ctx.inputs, ctx.memory = module, args + saved, memory
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        module = ctx.module
        inputs, ctx.inputs = ctx.inputs, None   # the run frees each saved value after its last reader
        by_name = dict(zip(module._grad_names, module.backward_program.run(inputs, ctx.memory)))
        if ctx.memory is not None:   # on a GPU the allocator's own high-water mark
            module.peak_bytes = torch.cuda.max_memory_allocated(grad_loss.device) if grad_loss.is_cuda \
                else ctx.memory.peak
        # the programs' gradients are of the loss itself: scale by the incoming gradient (exact,
        # linear), in place: they are the program's own fresh tensors
        grads = [by_name[n].mul_(grad_loss) if n in by_name else None for n in module._param_names]
        return (None, None, None, *grads)


class CompiledModule(nn.Module):
    def __init__(self, artifact: Artifact):
        super().__init__()
        self.artifact = artifact
        prog = artifact.program
        self.mesh = Mesh(prog["mesh"]["sp"], prog["mesh"]["dp"])
        fwd, bwd = prog["programs"]["forward"], prog["programs"]["backward"]
        self.forward_program, self.backward_program = Program(fwd, self.mesh), Program(bwd, self.mesh)
        self._param_names = [a["name"] for a in fwd["args"] if a["role"] == "param"]
        self._buffer_names = [a["name"] for a in fwd["args"] if a["role"] == "buffer"]
        self._grad_names = [r.split(":", 1)[1] for r in bwd["results"]]
        self.input_shape = next(a["shape"] for a in fwd["args"] if a["role"] == "input")
        # measure_memory: track the live bytes of every step; peak_bytes is the last step's high-water
        # mark (parameters, buffers, .grad, inputs, saved values and every program value; on a GPU
        # torch.cuda.max_memory_allocated)
        self.measure_memory = False
        self.peak_bytes: int | None = None
        specs = artifact.params["parameters"]
        for name in self._param_names:
            spec = specs[name]
            p = nn.Parameter(torch.empty(spec["shape"], dtype=DTYPES[spec["dtype"]]),
                             requires_grad=spec["requires_grad"])
            self._place(name, p, parameter=True)
            for alias in spec.get("aliases", []):
                self._place(alias, p, parameter=True)
        for name in self._buffer_names:
            self._place(name, artifact.buffer(name), parameter=False)

    def _start_measuring(self, params) -> LiveBytes:
        if params[0].is_cuda:
            torch.cuda.reset_peak_memory_stats(params[0].device)
        resident = [*params, *self.buffers(), *(p.grad for p in params if p.grad is not None)]
        return LiveBytes(base=resident_bytes(resident), exclude=resident)

    def _place(self, qualified: str, value, parameter: bool) -> None:
        try:
            self._insert(qualified, value, parameter)
        except KeyError as e:   # a name nn.Module keeps for itself ("forward", "training", ...)
            raise ArtifactError(f"{self.artifact.path}: params.json names {qualified!r}, which cannot be placed in "
                                f"the module ({e.args[0]})") from None

    def _insert(self, qualified: str, value, parameter: bool) -> None:
        path, _, leaf = qualified.rpartition(".")
        mod: nn.Module = self
        for part in path.split(".") if path else []:
            if part not in mod._modules:
                mod.add_module(part, nn.Module())
            mod = mod._modules[part]
        if parameter:
            mod.register_parameter(leaf, value)
        else:
            mod.register_buffer(leaf, value, persistent=False)

    def arguments(self, params, input_ids, labels) -> list[torch.Tensor]:
        buffers = [self.get_buffer(n) for n in self._buffer_names]
        return [*params, *buffers, input_ids, labels]

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if list(input_ids.shape) != self.input_shape or list(labels.shape) != self.input_shape:
            raise ValueError(f"compiled for input_ids and labels of shape {self.input_shape}, got "
                             f"{list(input_ids.shape)} and {list(labels.shape)}")
        params = [self.get_parameter(n) for n in self._param_names]
        self.forward_program.device = self.backward_program.device = params[0].device
        return _Step.apply(self, input_ids.to(params[0].device), labels.to(params[0].device), *params)


def load(path: str) -> CompiledModule:
    """Load and verify an artifact; call inside the initialized process group (world = sp x dp)."""
    return CompiledModule(read(path))
