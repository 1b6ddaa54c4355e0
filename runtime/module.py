"""The compiled step as an nn.Module with the source model's parameter names.

loss = m(input_ids, labels) runs the forward program, which returns the loss and what the backward
needs (as sp-plan-remat chose); loss.backward() runs the backward program and hands the
already-reduced gradients to autograd, so .grad accumulates as usual and any torch optimizer,
torch.save(m.state_dict()) and DDP-style loops work unchanged."""
from __future__ import annotations

import warnings

import torch
import torch.nn as nn

from .artifact import DTYPES, PACKED_INPUTS, Artifact, ArtifactError, read
from .collectives import DEFAULT_TIMEOUT_S, Mesh, largest_message
from .documents import IGNORE_INDEX, step_inputs
from .executor import Program
from .gpu_kernels import GpuObjects
from .graphs import Graphs
from .memory import LiveBytes, resident_bytes
from .packing import pack, packs



class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx, module: "CompiledModule", inputs: list[torch.Tensor], *params):
        args = module.arguments(params, inputs)
        memory = module._start_measuring(params) if module.measure_memory else None
        ctx.module, ctx.memory, ctx.inputs = module, memory, None
        graphed = module.graphs.forward(args[:-len(inputs)], inputs, module._grad_params) \
            if module.graphs is not None else None
        if graphed is not None:   # a CUDA-graph replay (graphs.py): its saved values live in the graph
            loss, ctx.ticket = graphed
            return loss
        ctx.ticket = None
        loss, *saved = module.forward_program.run(list(args), memory)
        if module.graphs is not None:
            module.graphs.ran(0)
        ctx.inputs = args + saved
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        module = ctx.module
        if ctx.ticket is not None:   # already scaled by grad_loss inside the graph
            by_name = dict(zip(module._grad_names, module.graphs.backward(ctx.ticket, grad_loss)))
        else:
            inputs, ctx.inputs = ctx.inputs, None   # the run frees each saved value after its last reader
            by_name = dict(zip(module._grad_names, module.backward_program.run(inputs, ctx.memory)))
            if module.graphs is not None:
                module.graphs.ran(1)
            # the programs' gradients are of the loss itself: scale by the incoming gradient (exact,
            # linear), in place: they are the program's own fresh tensors
            for g in by_name.values():
                g.mul_(grad_loss)
        if ctx.memory is not None:   # on a GPU the allocator's own high-water mark (a graph's: its pool)
            module.peak_bytes = ctx.memory.peak if not grad_loss.is_cuda else \
                torch.cuda.max_memory_reserved(grad_loss.device) if ctx.ticket is not None else \
                torch.cuda.max_memory_allocated(grad_loss.device)
        return (None, None, *(by_name.get(n) for n in module._param_names))


class CompiledModule(nn.Module):
    def __init__(self, artifact: Artifact, timeout_s: float = DEFAULT_TIMEOUT_S, cuda_graphs: bool = False,
                 kernels: bool = True):
        super().__init__()
        self.artifact = artifact
        prog = artifact.program
        mesh = prog["mesh"]
        fwd, bwd = prog["programs"]["forward"], prog["programs"]["backward"]
        self.mesh = Mesh(mesh["sp"], mesh["dp"], timeout_s, mesh.get("order", "contiguous"), mesh.get("ulysses", 1),
                         largest_message([fwd, bwd], mesh["sp"] * mesh["dp"]))
        self.forward_program = Program(fwd, self.mesh, "forward program")
        self.backward_program = Program(bwd, self.mesh, "backward program")
        self.forward_program.objects = self.backward_program.objects = GpuObjects(artifact) if kernels else None
        self._param_names = [a["name"] for a in fwd["args"] if a["role"] == "param"]
        self._buffer_names = [a["name"] for a in fwd["args"] if a["role"] == "buffer"]
        self._grad_names = [r.split(":", 1)[1] for r in bwd["results"]]
        self.input_shape = next(a["shape"] for a in fwd["args"] if a["role"] == "input")
        # packed documents: the step also takes position_ids and document positions (documents.py)
        self.packed = [a["name"] for a in fwd["args"] if a["role"] == "input"] == list(PACKED_INPUTS)
        if cuda_graphs and self.packed:
            raise ValueError("cuda_graphs=True: this step takes packed documents, whose attention FlashAttention "
                             "sizes by each step's longest document (read on the host, which a CUDA graph cannot "
                             "replay); load it with cuda_graphs=False")
        self.graphs = Graphs(self.forward_program, self.backward_program) if cuda_graphs else None
        # measure_memory: track the live bytes of every step; peak_bytes is the last step's high-water
        # mark (parameters, buffers, .grad, inputs, saved values and every program value; on a GPU
        # torch.cuda.max_memory_allocated)
        self.measure_memory = False
        self._warned_no_tokens = False   # a batch without a counted label warns once
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
        # where each parameter and buffer sits (its module and name there): read at every step, without
        # get_parameter's walk from the root, and still what a user assigned there
        self._slots = {n: self._slot(n) for n in [*self._param_names, *self._buffer_names, *self._grad_names]}
        # the groups sp-merge-projections stacks: kept side by side in one storage (packing.py)
        self._packs = list({tuple(g): None for p in (fwd, bwd) for g in packs(p).values()})
        self._pack_params()

    def _slot(self, qualified: str) -> tuple[dict, str]:
        path, _, leaf = qualified.rpartition(".")
        mod = self.get_submodule(path) if path else self
        return (mod._parameters if leaf in mod._parameters else mod._buffers), leaf

    def _get(self, names: list[str]) -> list:
        return [table[leaf] for table, leaf in map(self._slots.__getitem__, names)]

    def _grad_params(self) -> list[nn.Parameter]:
        """The parameter of each gradient the backward program returns."""
        return self._get(self._grad_names)

    def _pack_params(self) -> None:
        """Each stacked group in one storage again (after .to() / .cuda(), which copy each parameter)."""
        for group in self._packs:
            pack(self._get(group))

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

    def arguments(self, params, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        buffers = self._get(self._buffer_names)
        return [*params, *buffers, *inputs]

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, attention_mask: torch.Tensor | None = None,
                position_ids: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None) -> torch.Tensor:
        """The loss of one step. With packed documents (compile(packed=True)): attention_mask (1 token,
        0 padding, right or left), position_ids restarting per document, or cu_seqlens (documents.py)."""
        if list(input_ids.shape) != self.input_shape or list(labels.shape) != self.input_shape:
            raise ValueError(f"compiled for input_ids and labels of shape {self.input_shape}, got "
                             f"{list(input_ids.shape)} and {list(labels.shape)}")
        given = [n for n, x in (("attention_mask", attention_mask), ("position_ids", position_ids),
                                ("cu_seqlens", cu_seqlens)) if x is not None]
        if given and not self.packed:
            raise ValueError(f"{', '.join(given)}: this step was compiled without packed documents; compile with "
                             "packed=True (autospc compile --packed) to pass padding masks or packed documents")
        if not self._warned_no_tokens and labels.device.type == "cpu" and bool((labels == IGNORE_INDEX).all()):
            self._warned_no_tokens = True
            warnings.warn(f"every label is {IGNORE_INDEX} (ignore_index): the loss is a mean over zero tokens, NaN, "
                          "as eager PyTorch's cross_entropy gives (and zero gradients)", RuntimeWarning, stacklevel=2)
        self._pack_params()
        params = self._get(self._param_names)
        device = params[0].device
        self.forward_program.device = self.backward_program.device = device
        input_ids, labels = input_ids.to(device), labels.to(device)
        inputs = step_inputs(input_ids, labels, attention_mask, position_ids, cu_seqlens) if self.packed else \
            [input_ids, labels]
        return _Step.apply(self, inputs, *params)


    def rng_state(self) -> dict[str, torch.Tensor]:
        """This rank's dropout generators (torch.Generator states, uint8): with torch's own RNG and
        the data position, what a checkpoint needs for a bit-identical resume. Each program's
        generator is created here if it was not yet (seeded as the first draw would seed it)."""
        return {name: self._program_generator(prog).get_state() for name, prog in self._programs().items()}

    def set_rng_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore what rng_state() returned (on the same rank of the same mesh)."""
        for name, prog in self._programs().items():
            self._program_generator(prog).set_state(state[name])

    def _programs(self) -> dict[str, Program]:
        return {"forward": self.forward_program, "backward": self.backward_program}

    def _program_generator(self, prog: Program) -> torch.Generator:
        prog.device = next(self.parameters()).device
        return prog._generator()


def load(path: str, timeout_s: float = DEFAULT_TIMEOUT_S, cuda_graphs: bool = False, kernels: bool = True
         ) -> CompiledModule:
    """Load and verify an artifact; call inside the initialized process group (world = sp x dp).
    Its collectives give up after timeout_s seconds without an answer from a peer (CollectiveError
    naming the collective and the peers), and a rank whose step fails makes every rank fail it.
    cuda_graphs: on CUDA, capture the forward and backward programs at the second step and replay
    them after (graphs.py); not for packed documents. kernels=False: the fused kernels run as the
    ATen ops they replaced even where the artifact has objects for the device (to compare)."""
    return CompiledModule(read(path), timeout_s, cuda_graphs, kernels)
