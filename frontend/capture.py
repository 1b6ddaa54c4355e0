"""Capture one training step (loss and backward) as one joint aten graph, on fake tensors.

The model's parameters never get memory here: they are swapped for fake tensors (the model may
live on meta). Attention goes through `autosp::attention` (see attention_op.py).
"""
from __future__ import annotations

import contextlib
import difflib
import operator
import warnings
from dataclasses import dataclass, field
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._functorch.aot_autograd import aot_export_module
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from autosp.runtime.artifact import ALLOWED_ATEN, INPUTS, PACKED_INPUTS

from .attention_op import DOC_POS, AttentionCapture, hf_attention
from .errors import CaptureError, CompileError, user_frame, user_source

_MULS = {torch.mul, torch.Tensor.mul, torch.Tensor.__mul__, torch.Tensor.__rmul__}
_MATMULS = {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.bmm, torch.einsum,
            torch.baddbmm}


@dataclass
class CapturedStep:
    graph: torch.fx.GraphModule
    param_names: list[str]                   # graph inputs, in order (deduplicated)
    param_aliases: dict[str, list[str]]      # tied parameters: name -> other state_dict names
    buffer_names: list[str]
    buffers: dict[str, torch.Tensor]          # real values of the buffers the graph reads
    grad_of: dict[int, str]                  # graph output index -> parameter name
    input_names: list[str] = field(default_factory=lambda: list(INPUTS))
    requires_grad: dict[str, bool] = field(default_factory=dict)


# precision -> the autocast dtype of the step (None: the model's own dtypes)
PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def _autocast(precision: str) -> contextlib.AbstractContextManager:
    """Mixed precision as torch.autocast applies it, baked into the captured graph as casts. CPU
    autocast, because the capture traces CPU fake tensors (its op lists are the rules the program
    follows on any device); no cast cache, so every trace records its own casts."""
    if precision not in PRECISIONS:
        raise CompileError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    dtype = PRECISIONS[precision]
    return torch.autocast("cpu", dtype=dtype, cache_enabled=False) if dtype else contextlib.nullcontext()


class _TrainStep(nn.Module):
    """Wraps the user's model so the traced function returns (loss,); the forward runs under the
    precision's autocast and the backward outside it, as in eager training."""

    def __init__(self, model: nn.Module, precision: str):
        super().__init__()
        self.m = model
        self.hf = hasattr(model, "config") and hasattr(model, "can_generate")
        self.precision = precision

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, position_ids: torch.Tensor | None = None,
                doc_pos: torch.Tensor | None = None):
        token = DOC_POS.set(doc_pos)
        try:
            positions = {} if position_ids is None else {"position_ids": position_ids}
            with _autocast(self.precision):
                out = self.m(input_ids=input_ids, labels=labels, use_cache=False, **positions) if self.hf \
                    else self.m(input_ids, labels)
        finally:
            DOC_POS.reset(token)
        loss = getattr(out, "loss", out)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise CompileError("the model must return a scalar loss (or an output with .loss) "
                               "when called with (input_ids, labels)")
        return (loss,)


def _dropout(input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> torch.Tensor | None:
    """F.dropout as the op the joint graph records for it (aten.native_dropout; eager on CPU runs
    bernoulli_ and mul instead), so the op check sees what the program runs; None: leave it alone
    (no dropout, which is a copy, or in place, which the op check reports)."""
    if not training or p == 0 or inplace:
        return None
    return torch.ops.aten.native_dropout.default(input, p, True)[0]


class _StepMode(AttentionCapture):
    """SDPA and dropout redirection plus the module path and a check for attention computed by hand."""

    def __init__(self, model: nn.Module, seq_len: int):
        super().__init__()
        self.seq_len = seq_len
        self.names = {id(m): (n or "<root>", type(m).__name__) for n, m in model.named_modules()}
        self.stack: list[tuple[str, str]] = []
        self.hooks: list = []
        self.ones: dict[int, torch.Tensor] = {}   # tensors made by torch.ones (kept alive: ids stay theirs)

    def __enter__(self):
        def enter(m, args) -> None:
            # a module the model does not name (transformers' kernelized functions, e.g. its RoPE, wrapped
            # in a Func module at each call) belongs to the module that calls it
            outer = self.stack[-1][0] if self.stack else "?"
            self.stack.append(self.names.get(id(m), (outer, type(m).__name__)))

        def leave(m, args, out) -> None:
            self.stack.pop()

        self.hooks = [torch.nn.modules.module.register_module_forward_pre_hook(enter),
                      torch.nn.modules.module.register_module_forward_hook(leave)]
        return super().__enter__()

    def __exit__(self, *exc):
        for h in self.hooks:
            h.remove()
        return super().__exit__(*exc)

    def where(self) -> str | None:
        line = user_frame()
        if self.stack:
            name, cls = self.stack[-1]
            return f"{line} (in {name}: {cls})" if line else f"{name} ({cls})"
        return line

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.dropout:
            out = _dropout(*args, **(kwargs or {}))
            if out is not None:
                return out
        if args and id(args[0]) in self.ones and getattr(func, "__name__", "").endswith("_"):
            del self.ones[id(args[0])]   # changed in place: no longer known to be ones
        if func in (torch.cumsum, torch.Tensor.cumsum) and args and id(args[0]) in self.ones:
            return _cumsum_of_ones(*args, **(kwargs or {}))
        if func in _MULS and len(args) == 2 and not kwargs:   # x * ones: x (OPT masks its positions so)
            x, y = args if id(args[1]) in self.ones else args[::-1]
            if id(y) in self.ones and isinstance(x, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype:
                return x.mul(1)   # a new tensor, as the product is
        try:
            out = super().__torch_function__(func, types, args, kwargs)
        except CaptureError as e:
            if e.where and "(in " not in e.where:
                raise CaptureError(str(e).split(": error: ", 1)[-1], self.where()) from None
            raise
        if func is torch.ones and isinstance(out, torch.Tensor):
            self.ones[id(out)] = out
        if func in _MATMULS and isinstance(out, torch.Tensor) and out.dim() >= 3 \
                and tuple(out.shape[-2:]) == (self.seq_len, self.seq_len) \
                and not any(isinstance(a, nn.Parameter) for a in args):
            raise CaptureError(
                f"attention is computed by hand here (a [{self.seq_len} x {self.seq_len}] score matrix); "
                "autosp shards attention only through torch.nn.functional.scaled_dot_product_attention "
                "(for Hugging Face models: attn_implementation='sdpa')", self.where())
        return out


def _cumsum_of_ones(x: torch.Tensor, dim: int, dtype: torch.dtype | None = None, **_) -> torch.Tensor:
    """cumsum of torch.ones along `dim`, folded to the positions 1..n it is: OPT's learned positions
    (cumsum of an all-ones mask) then shard as an arange does, each rank its global positions, where
    a scan over the sequence would need every earlier rank's sum."""
    n = x.shape[dim]
    shape = [1] * x.dim()
    shape[dim] = n
    steps = torch.arange(1, n + 1, dtype=dtype or x.dtype, device=x.device)
    return steps.view(shape).expand(x.shape)


# dispatched while tracing but never part of a program (device queries, the semantic attention op)
_DEVICE_QUERY = "prim.device.default"
_TRACE_ONLY = {_DEVICE_QUERY, "autosp.attention.default"}


class _OpCheck(TorchDispatchMode):
    """A fake forward pass over the live Python stack (the joint graph export carries no usable
    source locations): names the first op the runtime cannot execute at its source line, and logs
    (op, source) of every forward op so the joint graph's nodes can get their locations back."""

    def __init__(self, mode: _StepMode):
        super().__init__()
        self.mode = mode
        self.log: list[tuple[str, tuple[str, int, str] | None]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name not in ALLOWED_ATEN and name not in _TRACE_ONLY:
            raise CaptureError(f"unsupported op {name}: the autosp runtime does not execute it", self.mode.where())
        src = user_source()
        module = self.mode.stack[-1][0] if self.mode.stack else ""
        module = "" if module in ("<root>", "?") else module    # the model itself / autosp's wrapper
        self.log.append((name, (*src, module) if src else None))
        return func(*args, **(kwargs or {}))


_PASS_THROUGH = (operator.getitem, torch.ops.aten.detach.default, torch.ops.aten.alias.default,
                 torch.ops.aten.clone.default)
_UNALIGNED = {_DEVICE_QUERY, "aten._assert_tensor_metadata.default", *map(str, _PASS_THROUGH)}


def _restore_locations(gm: torch.fx.GraphModule, log: list[tuple[str, tuple[str, int, str] | None]]) -> None:
    """Give joint-graph nodes source lines and module paths (meta "autosp_src" = (file, line, module)):
    a forward node takes those of the logged forward op it aligns with (same op sequence); a backward
    node those of the latest forward value it reads (what it differentiates), else of its first
    located input."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    # aligned: only the ops both sides have one for one. Left in, the others (a device query per
    # dispatched op; the export's getitems, metadata asserts, and detaches and clones the two sides
    # do not have alike) let the longest-block matcher pair one layer's ops with the next layer's
    # (GPT-2's first layer went to wpe, its MLP to h.1), and an op placed in the wrong layer is
    # saved as a value crossing a layer boundary
    ops = [n for n in nodes if str(n.target) not in _UNALIGNED]
    log = [entry for entry in log if entry[0] not in _UNALIGNED]
    matcher = difflib.SequenceMatcher(None, [str(n.target) for n in ops], [name for name, _ in log], autojunk=False)
    located: dict[torch.fx.Node, tuple[str, int, str]] = {}
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            src = log[block.b + i][1]
            if src is not None:
                located[ops[block.a + i]] = src
    for node in nodes:   # getitem / detach / alias / clone read the line of the op that made their input
        if node.target in _PASS_THROUGH and node.args[0] in located and node not in located:
            located[node] = located[node.args[0]]
    forward = dict(located)
    order = {n: i for i, n in enumerate(nodes)}
    for node in nodes:
        if node in located:
            continue
        fwd_inputs = [a for a in node.all_input_nodes if a in forward]
        src = forward[max(fwd_inputs, key=order.__getitem__)] if fwd_inputs else \
            next((located[a] for a in node.all_input_nodes if a in located), None)
        if src is not None:
            located[node] = src
    for node, src in located.items():
        node.meta["autosp_src"] = src


@contextlib.contextmanager
def _hf_compat(model: nn.Module) -> Iterator[None]:
    """transformers, while the step is captured: attention through the implementation "autosp"
    (attention_op.hf_attention, which keeps sliding windows; transformers builds no mask for an
    implementation without one) instead of "sdpa"; and a training step built from (input_ids, labels)
    has no packed sequences, which transformers probes with a data-dependent branch."""
    try:
        import transformers
        import transformers.masking_utils as mu
    except ImportError:
        yield
        return
    transformers.AttentionInterface.register("autosp", hf_attention)
    configs = {id(c): c for m in model.modules() if (c := getattr(m, "config", None)) is not None
               and getattr(c, "_attn_implementation", None) == "sdpa"}
    saved = mu.find_packed_sequence_indices
    mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        for c in configs.values():
            c._attn_implementation = "autosp"
        yield
    finally:
        mu.find_packed_sequence_indices = saved
        for c in configs.values():
            c._attn_implementation = "sdpa"


def capture_train_step(model: nn.Module, batch: int, seq_len: int, precision: str = "fp32",
                       packed: bool = False) -> CapturedStep:
    """The joint forward+backward graph of `loss = model(input_ids, labels)` at [batch, seq_len];
    precision "bf16" / "fp16": the forward under torch.autocast (parameters stay as they are);
    packed: the step also takes position_ids and document positions (PACKED_INPUTS)."""
    if batch < 1 or seq_len < 2:
        raise CompileError(f"a training step needs batch >= 1 and seq_len >= 2 (the loss predicts each next "
                           f"token), got batch={batch}, seq_len={seq_len}")
    names = PACKED_INPUTS if packed else INPUTS
    if packed and not (hasattr(model, "config") and hasattr(model, "can_generate")):
        raise CompileError("packed documents and attention masks need a Hugging Face causal LM (autosp passes "
                           "position_ids and keeps attention within each document); this model is called "
                           "with (input_ids, labels) only")
    named = dict(model.named_parameters(remove_duplicate=False))
    unique = dict(model.named_parameters())
    first = {id(p): n for n, p in unique.items()}
    tied: dict[int, list[str]] = {}   # tied parameters: every name of one tensor
    for n, p in named.items():
        tied.setdefault(id(p), []).append(n)
    buffers = dict(model.named_buffers())
    for n, b in buffers.items():
        if b.device.type == "meta":
            raise CompileError(f"buffer {n!r} lives on the meta device, so its values are unknown; build the "
                               "model under autosp.empty_weights() (parameters on meta, buffers real)")

    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def fake(t: torch.Tensor) -> torch.Tensor:
        with fake_mode:
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")

    swap = {n: nn.Parameter(fake(p), requires_grad=p.requires_grad) for n, p in unique.items()}
    for n, p in named.items():
        if n not in unique:
            swap[n] = swap[first[id(p)]]
    swap.update({n: fake(b) for n, b in buffers.items()})
    with fake_mode:
        inputs = [torch.zeros(batch, seq_len, dtype=torch.long) for _ in names]

    _autocast(precision)   # an unknown precision fails before any tracing
    step = _TrainStep(model, precision)
    was_training = model.training
    model.train()
    try:
        with torch.nn.utils.stateless._reparametrize_module(model, swap, tie_weights=True), \
                _hf_compat(model), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with _StepMode(model, seq_len) as mode, fake_mode, _OpCheck(mode) as check:
                step(*inputs)
            with _StepMode(model, seq_len), torch.fx.traceback.preserve_node_meta():  # seq_nr links bwd to fwd
                gm, sig = aot_export_module(step, inputs, trace_joint=True, output_loss_index=0)
        _restore_locations(gm, check.log)
    finally:
        model.train(was_training)

    strip = lambda n: n[2:] if n.startswith("m.") else n  # noqa: E731  (the wrapper's prefix)
    out_names = [n.name for n in gm.graph.find_nodes(op="output")[0].args[0]]
    grad_of = {out_names.index(o): strip(p) for o, p in sig.backward_signature.gradients_to_parameters.items()}
    pnames = [strip(n) for n in sig.parameters]
    bnames = [strip(n) for n in sig.buffers]
    return CapturedStep(
        graph=gm, param_names=pnames,
        param_aliases={n: [a for a in tied[id(named[n])] if a != n] for n in pnames},
        buffer_names=bnames, buffers={n: buffers[n].detach().cpu() for n in bnames}, grad_of=grad_of,
        requires_grad={n: named[n].requires_grad for n in pnames}, input_names=list(names))
