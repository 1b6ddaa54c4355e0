"""The compiled step as an nn.Module with the source model's parameter names.

loss = m(input_ids, labels) runs the whole compiled step (forward and backward); loss.backward()
hands the already-reduced gradients to autograd, so .grad accumulates as usual and any torch
optimizer, torch.save(m.state_dict()) and DDP-style loops work unchanged."""
from __future__ import annotations

import torch
import torch.nn as nn

from .artifact import DTYPES, Artifact, read
from .collectives import Mesh
from .executor import Program


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module: "CompiledModule", input_ids, labels, *params):
        outs = module.program.run(module.arguments(params, input_ids, labels))
        by_name = dict(zip(module._grad_names, outs[1:]))
        ctx.grads = [by_name.get(n) for n in module._param_names]
        return outs[0]

    @staticmethod
    def backward(ctx, grad_loss):
        # the step's gradients are of the loss itself: scale by the incoming gradient (exact, linear)
        grads = [None if g is None else g * grad_loss for g in ctx.grads]
        ctx.grads = None
        return (None, None, None, *grads)


class CompiledModule(nn.Module):
    def __init__(self, artifact: Artifact):
        super().__init__()
        self.artifact = artifact
        prog = artifact.program
        self.mesh = Mesh(prog["mesh"]["sp"], prog["mesh"]["dp"])
        self.program = Program(prog, self.mesh)
        self._param_names = [a["name"] for a in prog["args"] if a["role"] == "param"]
        self._buffer_names = [a["name"] for a in prog["args"] if a["role"] == "buffer"]
        self._grad_names = [r.split(":", 1)[1] for r in prog["results"][1:]]
        self.input_shape = next(a["shape"] for a in prog["args"] if a["role"] == "input")
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

    def _place(self, qualified: str, value, parameter: bool) -> None:
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
        self.program.device = params[0].device
        return _Step.apply(self, input_ids.to(params[0].device), labels.to(params[0].device), *params)


def load(path: str) -> CompiledModule:
    """Load and verify an artifact; call inside the initialized process group (world = sp x dp)."""
    return CompiledModule(read(path))
