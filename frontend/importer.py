"""FX joint graph -> torch-mlir `torch` dialect, with the step's signature recorded on the function."""
from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_d
from torch_mlir.extras.fx_importer import ContextCache, FxImporter

from .capture import CapturedStep

FUNC_NAME = "train_step"


def _strings(xs: list[str]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(x) for x in xs])


class _LocatedCache(ContextCache):
    """Locations from capture's restored sources: the module path (NameLoc) around file:line."""

    def get_node_location(self, node) -> ir.Location:
        src = node.meta.get("autosp_src")
        if src is None:
            return ir.Location.unknown(context=self._c)
        file, line, module = src
        loc = ir.Location.file(file, line, 0, context=self._c)
        return ir.Location.name(module, childLoc=loc, context=self._c) if module else loc


def import_step(step: CapturedStep, context: ir.Context) -> ir.Module:
    """Import the joint graph as func @train_step(params..., buffers..., input_ids, labels) ->
    (loss, grads...). `sp.args` names every argument (param:N, buffer:N, input:N) and `sp.results`
    every result (loss, grad:N), so later stages need nothing but the module."""
    torch_d.register_dialect(context)
    imp = FxImporter(context=context)
    imp._cc = _LocatedCache(imp._c, py_attr_tracker=imp._py_attr_tracker)
    imp.import_stateless_graph(step.graph.graph, func_name=FUNC_NAME)
    module = imp.module
    args = ([f"param:{n}" for n in step.param_names] + [f"buffer:{n}" for n in step.buffer_names]
            + [f"input:{n}" for n in step.input_names])
    n_out = 1 + len(step.grad_of)
    results = ["loss"] + [f"grad:{step.grad_of[i]}" for i in range(1, n_out)]
    with context:
        func = next(op for op in module.body.operations if op.operation.name == "func.func")
        func.attributes["sp.args"] = _strings(args)
        func.attributes["sp.results"] = _strings(results)
    return module
