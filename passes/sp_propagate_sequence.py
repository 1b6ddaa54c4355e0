"""sp-propagate-sequence: decide the layout of every value (see layouts.py).

Seeds: the step's token inputs are sharded along the sequence (dim 1); parameters and buffers are
replicated. Each op's rule gives its results' layouts and, where an operand must change layout
first, a demand (`sp.demand`, operand index -> layout) that sp-partition-sequence materializes:
rep -> seq slices this rank's block locally, partial -> rep all-reduces.
Writes `sp.layout` on ops (one entry per result), `sp.arg_layouts` and `sp.seq_len` on the func.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from .attributes import func_attr
from .base import Pass, PassError
from .layouts import PARTIAL, REP, Layout, reshape_seq, seq
from .ops import (A, BINARY, CONSTANT, FACTORY, IDENTITY, LIST, NO_EFFECT, PARTIAL_UNARY, RANDOM, UNARY,
                  UNPACK)
from .torch_ir import (body_ops, const_value, func_of, int_list, is_tensor, is_tensor_list, op_name, shape,
                       string_array, strings)

INT64_MAX = 9223372036854775807


class Rules:
    """Layout rules, one method per op family. `get(v)` is an operand's layout."""

    def __init__(self, seq_len: int):
        self.seq_len = seq_len
        self.layout: dict[ir.Value, Layout] = {}

    def get(self, v: ir.Value) -> Layout:
        return self.layout.get(v, REP)

    # ------------------------------------------------------------------ helpers
    def fail(self, op, msg: str):
        raise PassError(f"{op_name(op).removeprefix('torch.')}: {msg}", op.location)

    def tensor_operands(self, op) -> list[tuple[int, ir.Value]]:
        return [(i, v) for i, v in enumerate(op.operation.operands) if is_tensor(v) or is_tensor_list(v)]

    def elementwise(self, op, linear_partial: bool = False):
        """Broadcasting elementwise ops: the sequence dim is aligned from the right."""
        rank = len(shape(op.operation.results[0]))
        ins = self.tensor_operands(op)
        seqs = {}
        for i, v in ins:
            lay = self.get(v)
            if lay.kind == "seq":
                seqs[(lay.dim + rank - len(shape(v)), lay.inner)] = i
            elif lay.kind not in ("rep", "partial"):
                self.fail(op, f"operand {i} has layout {lay}, which only its producer's partner op may read")
        demands: dict[int, Layout] = {}
        if len(seqs) > 1:
            self.fail(op, f"operands are sharded along different dims {sorted(seqs)}")
        if seqs:
            (d, inner), = seqs
            for i, v in ins:
                lay, s = self.get(v), shape(v)
                at = d - (rank - len(s))
                if lay.kind == "partial":
                    demands[i] = REP
                if lay.kind != "seq" and at >= 0 and s[at] != 1:
                    demands[i] = seq(at, inner)
            return [seq(d, inner)], demands
        partials = [i for i, v in ins if self.get(v).kind == "partial"]
        if not partials:
            return [REP], {}
        name = op_name(op)
        if linear_partial and (len(partials) == len(ins) and name in (A + "add.Tensor", A + "sub.Tensor")
                               or name in PARTIAL_UNARY
                               or (name in (A + "mul.Tensor", A + "div.Tensor") and partials == [ins[0][0]]
                                   or name == A + "mul.Tensor" and len(partials) == 1)):
            return [PARTIAL], {}
        return [REP], {i: REP for i in partials}

    def random(self, op, x, n: int):
        """Dropout: its output and mask take the input's layout, so each rank masks its own shard.
        Only a sequence-sharded input: each rank would draw a different mask for a replicated one
        (which would stop being replicated) and for each summand of a partial one."""
        lay = self.get(x[0])
        if lay.kind != "seq":
            self.fail(op, f"dropout of a value with layout {lay}: each rank draws its own mask, so only "
                          "sequence-sharded values (activations) can be dropped out")
        return [lay] * n, {}

    def same_as(self, v: ir.Value, n: int = 1):
        return [self.get(v)] * n, {}

    # ------------------------------------------------------------------ dispatch
    def infer(self, op) -> tuple[list[Layout], dict[int, Layout]]:
        name = op_name(op)
        x = list(op.operation.operands)
        results = list(op.operation.results)
        if name in IDENTITY:
            return [self.get(x[0])], {}
        if name in UNARY or name in BINARY:
            return self.elementwise(op, linear_partial=True)
        if name in FACTORY:
            return [REP] * len(results), {}
        if name in RANDOM:
            return self.random(op, x, len(results))
        if name == LIST:
            return self.elementwise_list(op)
        if name == UNPACK:
            return [self.get(x[0])] * len(results), {}
        lay = self.get(x[0]) if x else REP
        if all(self.get(v) == REP for _, v in self.tensor_operands(op)) and not name.startswith("sp."):
            return [REP] * len(results), {}   # replicated computation: every rank does the same
        method = getattr(self, "rule_" + name.removeprefix("torch.").replace(".", "_"), None)
        if method is None:
            self.fail(op, f"no sequence-sharding rule for this op (operand layouts: "
                          f"{', '.join(str(self.get(v)) for _, v in self.tensor_operands(op))})")
        return method(op, x, lay)

    def elementwise_list(self, op):
        lays = {str(self.get(v)) for v in op.operation.operands if is_tensor(v)}
        if not lays:
            return [REP], {}
        if len(lays) == 1:
            return [Layout.parse(lays.pop())], {}
        self.fail(op, f"list elements have different layouts {sorted(lays)}")

    # ------------------------------------------------------------------ shape ops
    def _reshape(self, op, x, lay):
        if lay.kind == "partial":
            return [PARTIAL], {}
        if lay.kind != "seq":
            self.fail(op, f"cannot reshape a value with layout {lay}")
        out = reshape_seq(shape(x[0]), lay, shape(op.operation.results[0]), self.seq_len)
        if out is None:
            self.fail(op, f"reshape {shape(x[0])} -> {shape(op.operation.results[0])} splits the sequence "
                          f"dim (layout {lay}) across dims")
        return [out], {}

    rule_aten_view = rule_aten__unsafe_view = rule_aten_reshape = _reshape

    def _permuted(self, lay: Layout, perm: list[int]) -> Layout:
        if not lay.sharded:
            return lay
        return Layout(lay.kind, perm.index(lay.dim), lay.inner)

    def rule_aten_transpose_int(self, op, x, lay):
        rank = len(shape(x[0]))
        d0, d1 = (int(const_value(v)[1]) % rank for v in x[1:3])
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        return [self._permuted(lay, perm)], {}

    def rule_aten_permute(self, op, x, lay):
        rank = len(shape(x[0]))
        return [self._permuted(lay, [d % rank for d in int_list(x[1])])], {}

    def rule_aten_t(self, op, x, lay):
        return [self._permuted(lay, [1, 0] if len(shape(x[0])) == 2 else [0])], {}

    def rule_aten_unsqueeze(self, op, x, lay):
        d = int(const_value(x[1])[1]) % (len(shape(x[0])) + 1)
        if lay.sharded and lay.dim >= d:
            lay = Layout(lay.kind, lay.dim + 1, lay.inner)
        return [lay], {}

    def rule_aten_squeeze_dim(self, op, x, lay):
        d = int(const_value(x[1])[1]) % len(shape(x[0]))
        if lay.sharded and shape(x[0])[d] == 1 and lay.dim > d:
            lay = Layout(lay.kind, lay.dim - 1, lay.inner)
        return [lay], {}

    def rule_aten_expand(self, op, x, lay):
        grow = len(shape(op.operation.results[0])) - len(shape(x[0]))
        return [Layout(lay.kind, lay.dim + grow, lay.inner) if lay.sharded else lay], {}

    def rule_aten_slice_Tensor(self, op, x, lay):
        d = int(const_value(x[1])[1]) % len(shape(x[0]))
        if lay.kind == "halo" and d == lay.dim:
            return self._halo_slice(op, x, lay, d)
        if not (lay.sharded and d == lay.dim):
            return [lay], {}
        ok_s, start = const_value(x[2])
        ok_e, end = const_value(x[3])
        ok_st, step = const_value(x[4])
        full = ok_s and ok_e and (start or 0) == 0 and (end is None or end >= shape(x[0])[d]) and step == 1
        if not full:
            self.fail(op, f"slicing the sequence dim {d} ({start}:{end}:{step}) is not shard-local; "
                          "shift labels by padding then slicing, as transformers does")
        return [lay], {}

    def _halo_slice(self, op, x, lay, d):
        ok_s, start = const_value(x[2])
        ok_e, end = const_value(x[3])
        if not (ok_s and ok_e and start == lay.inner and end >= shape(x[0])[d]):
            self.fail(op, "a sequence padded at the end must be sliced back by the same width (a label shift)")
        return [seq(d)], {}

    def rule_aten_constant_pad_nd(self, op, x, lay):
        pad = int_list(x[1])
        rank = len(shape(x[0]))
        if lay.kind != "seq":
            return [lay], {}
        before, after = pad[2 * (rank - 1 - lay.dim): 2 * (rank - 1 - lay.dim) + 2] \
            if 2 * (rank - lay.dim) <= len(pad) else (0, 0)
        if (before, after) == (0, 0):
            return [lay], {}
        if before != 0 or lay.inner != 1:
            self.fail(op, f"padding the sequence dim by ({before}, {after}) is not supported; only a pad "
                          "at the end followed by a slice (a label shift) is")
        return [Layout("halo", lay.dim, after)], {}

    def _drop_dim(self, op, x, lay):
        """select.int / unbind.int remove dim d (operand 1)."""
        d = int(const_value(x[1])[1]) % len(shape(x[0]))
        if lay.sharded and d == lay.dim:
            what = "selecting one position of" if op_name(op).endswith("select.int") else "unbinding"
            self.fail(op, f"{what} the sequence dim is not shard-local")
        if lay.sharded and d < lay.dim:
            lay = Layout(lay.kind, lay.dim - 1, lay.inner)
        return [lay], {}

    rule_aten_select_int = rule_aten_unbind_int = _drop_dim

    def rule_aten_cat(self, op, x, lay):
        d = int(const_value(x[1])[1])
        rank = len(shape(op.operation.results[0]))
        if lay.sharded and d % rank == lay.dim:
            self.fail(op, "concatenating along the sequence dim is not shard-local")
        return [lay], {}

    def _split(self, op, x, lay):
        d = int(const_value(x[2])[1]) % len(shape(x[0]))
        if lay.sharded and d == lay.dim:
            self.fail(op, "splitting along the sequence dim is not shard-local")
        return [lay] * len(op.operation.results), {}

    rule_aten_split_Tensor = rule_aten_split_with_sizes = _split

    def _sized_like_result(self, op, x, lay):
        """slice_backward / select_backward: the gradient has the layout of the sliced input."""
        d = int(const_value(x[2])[1]) % len(shape(op.operation.results[0]))
        name = op_name(op)
        if lay.sharded and name.endswith("select_backward") and d <= lay.dim:
            lay = Layout(lay.kind, lay.dim + 1, lay.inner)
        if lay.sharded and d == lay.dim:
            self.fail(op, "the gradient of a sequence slice is not shard-local")
        return [lay], {}

    rule_aten_slice_backward = rule_aten_select_backward = _sized_like_result

    # ------------------------------------------------------------------ reductions
    def _reduce(self, op, x, lay):
        rank = len(shape(x[0]))
        dims = int_list(x[1]) if len(x) > 1 and int_list(x[1]) is not None else list(range(rank))
        dims = [d % rank for d in dims] or list(range(rank))
        keep = bool(const_value(x[2])[1]) if len(x) > 2 and const_value(x[2])[0] and \
            isinstance(const_value(x[2])[1], bool) else False
        if lay.kind == "partial":
            return [PARTIAL], {}
        if lay.kind != "seq":
            self.fail(op, f"cannot reduce a value with layout {lay}")
        if lay.dim in dims:
            return [PARTIAL], {}
        return [seq(lay.dim if keep else lay.dim - sum(d < lay.dim for d in dims), lay.inner)], {}

    rule_aten_sum_dim_IntList = rule_aten_mean_dim = rule_aten_sum = rule_aten_mean = _reduce

    def _softmax(self, op, x, lay):
        rank = len(shape(x[0]))
        d = int(const_value(x[1])[1]) % rank
        if lay.kind == "seq" and d == lay.dim:
            self.fail(op, "softmax over the sequence dim is not shard-local (attention must go through SDPA)")
        return [lay], {}

    rule_aten__softmax = rule_aten__log_softmax = _softmax

    def _softmax_backward(self, op, x, lay):
        d = int(const_value(x[2])[1]) % len(shape(x[0]))
        if lay.kind == "seq" and d == lay.dim:
            self.fail(op, "softmax over the sequence dim is not shard-local")
        return self.elementwise(op)

    rule_aten__softmax_backward_data = rule_aten__log_softmax_backward_data = _softmax_backward

    # ------------------------------------------------------------------ contractions
    def rule_aten_mm(self, op, x, lay):
        a, b = self.get(x[0]), self.get(x[1])
        return self._contract(op, a, b, batch=0)

    def rule_aten_addmm(self, op, x, lay):
        lays, _ = self._contract(op, self.get(x[1]), self.get(x[2]), batch=0)
        bias = self.get(x[0])
        if lays[0].kind == "partial" or bias.kind not in ("rep",) and bias != lays[0]:
            self.fail(op, f"bias of layout {bias} cannot be added to a product of layout {lays[0]}")
        return lays, {}

    def rule_aten_bmm(self, op, x, lay):
        return self._contract(op, self.get(x[0]), self.get(x[1]), batch=1)

    def _contract(self, op, a: Layout, b: Layout, batch: int):
        """[.., M, K] @ [.., K, N] with `batch` leading batch dims."""
        if a.kind == "partial" and b == REP or a == REP and b.kind == "partial":
            return [PARTIAL], {}
        m, k_a, k_b, n = batch, batch + 1, batch, batch + 1
        if a.kind == "seq" and b == REP and a.dim in (m,) + tuple(range(batch)):
            return [a], {}
        if a == REP and b.kind == "seq" and b.dim == n:
            return [b], {}
        if a.kind == "seq" and b.kind == "seq":
            if a.dim == k_a and b.dim == k_b and a.inner == b.inner:
                return [PARTIAL], {}
            if batch and a.dim < batch and b.dim == a.dim:
                return [a], {}
            self.fail(op, "a product of two sequence-sharded operands over different dims needs the whole "
                          "sequence on each rank: attention computed by hand? use scaled_dot_product_attention")
        self.fail(op, f"no sharded form for a contraction of layouts {a} and {b}")

    # ------------------------------------------------------------------ model-specific ops
    def rule_aten_embedding(self, op, x, lay):
        idx = self.get(x[1])
        if self.get(x[0]) != REP or idx.kind != "seq":
            self.fail(op, f"embedding expects replicated weights and sharded indices, got {self.get(x[0])}, {idx}")
        return [idx], {}

    def rule_aten_embedding_dense_backward(self, op, x, lay):
        """Each rank scatters its tokens' gradient rows: a partial sum when the tokens are sharded, so
        the indices must be sharded as the gradient is (learned positions, GPT-2's wpe, are built
        replicated); a replicated or partial gradient keeps its layout with replicated indices."""
        grad = self.get(x[0])
        if grad.kind == "seq":
            return [PARTIAL], ({1: grad} if self.get(x[1]) != grad else {})
        return [grad], ({1: REP} if self.get(x[1]) != REP else {})

    def rule_aten_nll_loss_forward(self, op, x, lay):
        lt = self.get(x[1])
        if lay.kind != "seq" or lay.dim != 0 or lt != lay:
            self.fail(op, f"cross entropy expects token-sharded logits and targets, got {lay}, {lt}")
        ok, red = const_value(x[3])
        return ([seq(0, lay.inner), REP] if red == 0 else [REP, REP]), {}

    def rule_aten_nll_loss_backward(self, op, x, lay):
        return [self.get(x[1])], {}

    def rule_aten_native_layer_norm(self, op, x, lay):
        norm = len(int_list(x[1]))
        if lay.kind == "seq" and lay.dim >= len(shape(x[0])) - norm:
            self.fail(op, "layer norm over the sequence dim is not shard-local")
        return [lay, lay, lay], {}

    def rule_aten_native_layer_norm_backward(self, op, x, lay):
        return [self.get(x[1]), PARTIAL, PARTIAL], {}

    def rule_sp_attention(self, op, x, lay):
        for i in range(3):
            if self.get(x[i]) != seq(2):
                self.fail(op, f"attention operand {i} must be sharded along its sequence dim 2, got {self.get(x[i])}")
        return [seq(2), Layout("heads", 1)], self.doc_pos_demand(x, 3)

    def rule_sp_attention_grad(self, op, x, lay):
        return [seq(2)] * 3, self.doc_pos_demand(x, 6)

    def doc_pos_demand(self, x: list[ir.Value], i: int) -> dict[int, Layout]:
        """Document positions [B, S] sharded as the queries' sequence."""
        return {i: seq(1)} if len(x) > i and self.get(x[i]) != seq(1) else {}


def demands_attr(demands: dict[int, Layout]) -> ir.DictAttr:
    return ir.DictAttr.get({str(i): ir.StringAttr.get(str(l)) for i, l in demands.items()})


@dataclass
class PropagateSequence(Pass):
    """assign rep / partial / seq<d> layouts to every value"""
    name: ClassVar[str] = "sp-propagate-sequence"

    def run(self, module_op) -> None:
        func = func_of(module_op)
        roles = strings(func_attr(func, "sp.args"))
        args = list(func.regions[0].blocks[0].arguments)
        if len(roles) != len(args):
            raise PassError(f"sp.args names {len(roles)} arguments, the function has {len(args)}", func.location)
        inputs = [a for r, a in zip(roles, args) if r.startswith("input:")]
        if not inputs:
            raise PassError("the step has no token inputs (sp.args names none 'input:')", func.location)
        seq_len = shape(inputs[0])[1]
        rules = Rules(seq_len)
        arg_layouts = []
        for role, a in zip(roles, args):
            lay = seq(1) if role.startswith("input:") else REP
            if role.startswith("input:") and shape(a)[1] != seq_len:
                raise PassError(f"input {role[6:]} has sequence length {shape(a)[1]}, expected {seq_len}", func.location)
            rules.layout[a] = lay
            arg_layouts.append(str(lay))
        for op in body_ops(func):
            name = op_name(op)
            results = list(op.operation.results)
            if name in NO_EFFECT or name.startswith(CONSTANT) or name == "func.return":
                continue
            tensor_results = [r for r in results if is_tensor(r) or is_tensor_list(r)]
            if not tensor_results and name != LIST:
                continue
            if name == LIST and not is_tensor_list(results[0]):
                continue
            lays, demands = rules.infer(op)
            for r, l in zip(results, lays):
                rules.layout[r] = l
            op.operation.attributes["sp.layout"] = string_array([str(l) for l in lays])
            if demands:
                op.operation.attributes["sp.demand"] = demands_attr(demands)
        func.attributes["sp.arg_layouts"] = string_array(arg_layouts)
        func.attributes["sp.seq_len"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), seq_len)
