"""sp-partition-sequence: rewrite the global-shape step into the per-rank program.

Reads the layouts of sp-propagate-sequence. Every value gets its local type (seq dims / P), shape
constants follow, and the collectives are inserted: Ulysses all-to-alls around attention (K/V at
KV-head width; with fewer KV heads than ranks each KV head is repeated just enough that every rank
receives the heads its query heads read), the label shift as `sp.halo`,
the loss as a token-weighted global mean, partial sums all-reduced where a replicated value is
needed, weight gradients all-reduced (averaged over dp, as DDP does). Options: sp=P dp=D.
Collectives over a group of one rank are then folded away (their result is their operand): at sp=1
there is nothing to communicate, and sp-plan-remat, which always saves a collective's result, would
otherwise keep an attention input it could recompute.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from torch_mlir import ir

from autosp.dialects.sp import AllGatherOp, AllReduceOp, AllToAllOp, AttentionGradOp, AttentionOp, HaloOp, \
    RingAttentionGradOp, RingAttentionOp, ShardSliceOp
from .aten_call import ELEMENT_TYPES, meta_shapes
from .attention_scheme import MODE_HELP, Scheme, bytes_sent, candidates, choose, forced, mode_error
from .attributes import func_attr
from .base import OptionError, Pass, PassError, option
from .layouts import REP, Layout, local_shape, seq
from .ops import A, COLLECTIVES, IDENTITY, NO_EFFECT, RESHAPE, SHARD_SLICE
from .sp_propagate_sequence import INT64_MAX
from .torch_ir import (I64, aten, body_ops, const_bool, const_float, const_int, const_none, const_value, func_of,
                       dtype_str, int_list_value, is_tensor, op_name, shape, strings, vtensor, with_shape)




def _i64(v: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(I64(), v)


def _str(s: str) -> ir.StringAttr:
    return ir.StringAttr.get(s)


class Partitioner:
    def __init__(self, func, p: int, dp: int, attention: str = "auto"):
        self.func, self.p, self.dp, self.attention = func, p, dp, attention
        self.scheme = Scheme(p, 1)     # how attention is sharded (choose_attention)
        self.costs: dict[str, float] = {}   # bytes per rank per step of each scheme considered
        self.order = "contiguous"      # the sequence order of the shards (runtime/collectives.py)
        self.seq_len = ir.IntegerAttr(func_attr(func, "sp.seq_len")).value
        self.layout: dict[ir.Value, Layout] = {}
        self.converted: dict[tuple[ir.Value, str], ir.Value] = {}
        self.heads: dict[ir.Value, ir.Value] = {}      # seq-sharded value -> its head-sharded form
        self.kv_repeat: dict[ir.Value, int] = {}        # head-sharded K/V -> times each KV head was repeated
        self.doc_rows: dict[ir.Value, ir.Value] = {}    # document positions -> those of the local query rows

    # ------------------------------------------------------------------ building blocks
    def after_def(self, v: ir.Value) -> ir.InsertionPoint:
        owner = v.owner
        if isinstance(owner, ir.Block):
            return ir.InsertionPoint.at_block_begin(owner)
        return ir.InsertionPoint.after(owner.operation if isinstance(owner, ir.OpView) else owner)

    def a2a(self, v: ir.Value, scatter: int, gather: int, n: int, group: str) -> ir.Value:
        s = shape(v)
        s[scatter] //= n
        s[gather] *= n
        return AllToAllOp(v, _i64(scatter), _i64(gather), _str(group), out=with_shape(v.type, s)).out

    def all_reduce(self, v: ir.Value, group: str = "sp") -> ir.Value:
        return AllReduceOp(v, _str("sum"), _str(group), out=v.type).out

    def shard_slice(self, v: ir.Value, dim: int) -> ir.Value:
        return ShardSliceOp(v, _i64(dim), _str("sp"),
                            out=with_shape(v.type, local_shape(shape(v), Layout("seq", dim), self.p))).out

    def convert(self, op, v: ir.Value, want: Layout) -> ir.Value:
        """v in layout `want`, inserted right after v's definition and shared by all its users."""
        key = (v, str(want))
        if key in self.converted:
            return self.converted[key]
        have = self.layout.get(v, REP)
        with self.after_def(v), op.location:
            if have.kind == "partial" and want == REP:
                out = self.all_reduce(v)
            elif have == REP and want.kind == "seq":
                if want.inner != 1 or shape(v)[want.dim] != self.seq_len:
                    raise PassError(f"a replicated operand of shape {shape(v)} meets a sequence-sharded one "
                                    f"along dim {want.dim}, but that dim is not the sequence "
                                    f"(length {self.seq_len})", op.location)
                out = self.shard_slice(v, want.dim)
            else:
                raise PassError(f"no conversion from layout {have} to {want}", op.location)
        self.layout[out] = want
        self.converted[key] = out
        return out

    def replace(self, old: ir.Value, new: ir.Value, layout: Layout) -> None:
        old.replace_all_uses_with(new)
        self.layout[new] = layout

    # ------------------------------------------------------------------ driver
    def run(self) -> None:
        block = self.func.regions[0].blocks[0]
        roles = strings(func_attr(self.func, "sp.args"))
        arg_lays = [Layout.parse(s) for s in strings(func_attr(self.func, "sp.arg_layouts"))]
        why = indivisible(self.seq_len, self.p)
        if why:
            raise PassError(why, self.func.location)
        self.choose_attention()
        for role, a, lay in zip(roles, block.arguments, arg_lays):
            self.layout[a] = lay
            if lay.kind == "seq":
                with ir.InsertionPoint.at_block_begin(block), self.func.location:
                    s = self.shard_slice(a, lay.dim)
                a.replace_all_uses_except(s, s.owner.operation)
                self.layout[s] = lay
        for op in body_ops(self.func):
            self.visit(op)
        self.fold_single_rank_collectives()

    def fold_single_rank_collectives(self) -> None:
        size = {"sp": self.p, "dp": self.dp, "world": self.p * self.dp, "ulysses": self.scheme.ulysses,
                "ring": self.scheme.ring}
        for op in body_ops(self.func):
            if op_name(op) in _FOLDABLE and size[ir.StringAttr(op.operation.attributes["group"]).value] == 1:
                op.operation.results[0].replace_all_uses_with(op.operation.operands[0])
                op.operation.erase()

    def visit(self, op) -> None:
        name = op_name(op)
        attrs = op.operation.attributes
        if name in NO_EFFECT:
            op.operation.erase()
            return
        if name == "func.return":
            return self.on_return(op)
        if "sp.layout" not in attrs:
            return
        lays = [Layout.parse(s) for s in strings(attrs["sp.layout"])]
        if "sp.demand" in attrs:
            for key, want in _dict_items(attrs["sp.demand"]):
                i = int(key)
                op.operation.operands[i] = self.convert(op, op.operation.operands[i], Layout.parse(want))
            del attrs["sp.demand"]
        special = {"sp.attention": self.on_attention, "sp.attention_grad": self.on_attention_grad,
                   A + "nll_loss_forward": self.on_loss}.get(name)
        if special:
            return special(op, lays)
        if any(l.kind == "heads" for l in lays):
            # softmax statistics on their way to the attention backward (an identity): the local type
            # and layout the attention scheme gave them
            src = op.operation.operands[0]
            for r in op.operation.results:
                r.set_type(src.type)
                self.layout[r] = self.layout[src]
            return
        if any(l.kind == "halo" for l in lays):
            self.layout[op.operation.results[0]] = lays[0]
            return  # the pad of a label shift: replaced together with its slice
        x = list(op.operation.operands)
        if name == A + "slice.Tensor" and self.layout.get(x[0], REP).kind == "halo":
            return self.on_halo(op, lays)
        for r, lay in zip(op.operation.results, lays):
            self.layout[r] = lay
            if is_tensor(r):
                r.set_type(with_shape(r.type, local_shape(shape(r), lay, self.p)))
        self.localize_constants(op, name, lays)
        if name in (A + "mean.dim", A + "mean") and lays[0].kind == "partial" and \
                self.layout.get(x[0], REP).kind == "seq":
            self.scale_partial_mean(op)
        self.check_shapes(op)

    # ------------------------------------------------------------------ generic localization
    def localize_constants(self, op, name: str, lays: list[Layout]) -> None:
        x = list(op.operation.operands)
        res = op.operation.results
        if not any(l.sharded for l in lays):
            return
        with ir.InsertionPoint(op), op.location:
            if name in RESHAPE or name == A + "expand":
                op.operation.operands[1] = int_list_value(shape(res[0]))
            elif name in (A + "slice_backward", A + "select_backward"):
                op.operation.operands[1] = int_list_value(shape(res[0]))
            elif name == A + "slice.Tensor":
                lay = self.layout.get(x[0], REP)
                if lay.sharded and int(const_value(x[1])[1]) % len(shape(x[0])) == lay.dim:
                    op.operation.operands[3] = const_int(INT64_MAX)

    def scale_partial_mean(self, op) -> None:
        """The mean over the sequence is the sum of local means / P."""
        r = op.operation.results[0]
        with ir.InsertionPoint.after(op), op.location:
            scaled = aten("div.Scalar", [r, const_float(float(self.p))], [r.type]).results[0]
        r.replace_all_uses_except(scaled, scaled.owner.operation)
        self.layout[scaled] = self.layout[r]

    def check_shapes(self, op) -> None:
        """Run the op on meta tensors of the local operand types: the rules must agree."""
        if not op_name(op).startswith(("torch.aten.", "torch.prims.")):
            return
        try:
            got = meta_shapes(op)
        except Exception as e:  # an op that cannot run at these shapes is a sharding bug
            raise PassError(f"{op_name(op)} cannot run at the local shapes: {e}", op.location) from None
        if got is None:
            return
        want = [shape(r) for r in op.operation.results if is_tensor(r)]
        if got[:len(want)] != want:
            raise PassError(f"{op_name(op)}: local shapes {want} disagree with the op's own {got}", op.location)

    # ------------------------------------------------------------------ attention
    @property
    def ulysses_group(self) -> str:
        return "sp" if self.scheme.ring == 1 else "ulysses"

    @property
    def ring_group(self) -> str:
        return "sp" if self.scheme.ulysses == 1 else "ring"

    def choose_attention(self) -> None:
        """One scheme for every attention of the step (the sequence order is the program's): the
        cheapest that the `attention` option allows (attention_scheme.py). Causal ring attention takes
        the zigzag order when the sequence cuts into 2 x r chunks."""
        ops = [op for op in body_ops(self.func) if op_name(op) == "sp.attention"]
        if self.p == 1 or not ops:
            return
        heads = [shape(op.operation.operands[0])[1] for op in ops]
        options = candidates(self.attention, self.p, heads)
        if not options:
            op, h = next((op, h) for op, h in zip(ops, heads) if h % self.p or self.attention != "ulysses")
            if self.attention == "ulysses":
                raise PassError(f"attention has {h} heads, which sp={self.p} does not divide (Ulysses splits "
                                "heads across ranks; attention=ring or auto passes K/V blocks around the ranks "
                                "instead)", op.location)
            if (f := forced(self.attention)) is not None:
                op, h = next((op, h) for op, h in zip(ops, heads) if h % f.ulysses)
                raise PassError(f"attention={self.attention}: ulysses={f.ulysses} does not divide the {h} heads",
                                op.location)
            raise PassError(f"attention=hybrid needs ulysses x ring = sp={self.p} with 1 < ulysses < {self.p} "
                            f"dividing the {h} heads; there is none", op.location)

        def cost(scheme: Scheme) -> float:
            total = 0.0
            for op in ops:
                q, k = op.operation.operands[0], op.operation.operands[1]
                size = ELEMENT_TYPES[dtype_str(q.type)].itemsize
                local = [math.prod(shape(x)) * size / self.p for x in (q, k)]
                a = op.operation.attributes
                total += bytes_sent(scheme, shape(k)[1], *local, size, self.seq_len,
                                    bool(ir.IntegerAttr(a["causal"]).value), ir.IntegerAttr(a["window"]).value)
            return total
        self.scheme = choose(options, cost)
        self.costs = {str(o): cost(o) for o in candidates("auto", self.p, heads)}
        causal = any(ir.IntegerAttr(op.operation.attributes["causal"]).value for op in ops)
        # a sliding window balances the causal work of contiguous blocks by itself
        windowed = any(ir.IntegerAttr(op.operation.attributes["window"]).value for op in ops)
        if self.scheme.ring > 1 and causal and not windowed and self.seq_len % (2 * self.scheme.ring) == 0:
            self.order = "zigzag"

    def heads_of(self, op, v: ir.Value, kv: bool) -> ir.Value:
        """v ([B, H, S/sp, D], sequence-sharded) with its heads split over the ulysses group and its
        sequence gathered there: [B, H/u, S/r, D]."""
        src = v
        while src not in self.heads and _is_identity(src):   # detach/alias of an attention output
            src = src.owner.operation.operands[0]
        if src in self.heads:
            return self.heads[src]
        b, h, s, d = shape(v)
        u, group = self.scheme.ulysses, self.ulysses_group
        # KV heads repeated m times, m the least that u divides: rank j then receives the repeated heads
        # [j m h / u, (j + 1) m h / u), which are those its query heads read (every query head's KV head
        # is its index x m h / q_heads, floored), and no rank receives a KV head it does not read
        m = math.lcm(h, u) // h if kv else 1
        with ir.InsertionPoint(op), op.location:
            x = v if m == 1 else aten("repeat_interleave.self_int", [v, const_int(m), const_int(1), const_none()],
                                      [with_shape(v.type, [b, h * m, s, d])]).results[0]
            out = self.a2a(x, scatter=1, gather=2, n=u, group=group)
        self.kv_repeat[out] = m
        self.heads[v] = out
        return out

    def split_heads(self, op, *vs: ir.Value, kv: tuple[bool, ...]) -> list[ir.Value]:
        if self.scheme.ulysses == 1:   # ring alone: the sequence-sharded values as they are
            return list(vs)
        return [self.heads_of(op, v, k) for v, k in zip(vs, kv)]

    def doc_pos(self, op, first: int) -> ir.Value | None:
        """The attention's document positions ([B, S/sp], operand `first` if it has one) for the query rows
        it holds once the heads are split: gathered over the ulysses group (a ring block is the group's
        rows in its ranks' order, as the all-to-all gathers q), once per value."""
        ops = op.operation.operands
        if len(ops) <= first:
            return None
        d, u = ops[first], self.scheme.ulysses
        if u == 1:
            return d
        owner = d.owner
        if u == self.p and isinstance(owner, (ir.Operation, ir.OpView)) and op_name(owner) == SHARD_SLICE:
            return owner.operation.operands[0]   # Ulysses over all ranks: the input every rank has whole
        if d not in self.doc_rows:
            b, s = shape(d)
            with self.after_def(d), self.func.location:
                self.doc_rows[d] = AllGatherOp(d, _i64(1), _str(self.ulysses_group),
                                               out=with_shape(d.type, [b, s * u])).out
        return self.doc_rows[d]

    def attention_flags(self, op, q_head: ir.Value, kv_head: ir.Value):
        """causal, scale, the query heads per KV head of the local (head-split) q and k, and window."""
        a = op.operation.attributes
        # rebuilt: the builders drop a causal=false attribute read back from an op as falsy
        causal = ir.IntegerAttr.get(ir.IntegerType.get_signless(1), ir.IntegerAttr(a["causal"]).value)
        return causal, a["scale"], _i64(shape(q_head)[1] // shape(kv_head)[1]), a["window"]

    def on_attention(self, op, lays) -> None:
        q, k, v = list(op.operation.operands)[:3]
        qh, kh, vh = self.split_heads(op, q, k, v, kv=(False, True, True))
        doc_pos = self.doc_pos(op, 3)
        out_t = op.operation.results[0].type
        b, h, s, d = shape(qh)
        with ir.InsertionPoint(op), op.location:
            if self.scheme.ring > 1:
                new = RingAttentionOp(qh, kh, vh, *self.attention_flags(op, qh, kh), _str(self.ring_group),
                                      out=with_shape(out_t, [b, h, s, shape(vh)[3]]), lse=vtensor([b, h, s], "f32"),
                                      doc_pos=doc_pos)
            else:
                new = AttentionOp(qh, kh, vh, *self.attention_flags(op, qh, kh), out=with_shape(out_t, [b, h, s, d]),
                                  lse=with_shape(op.operation.results[1].type, [b, h, s]), doc_pos=doc_pos)
            out = new.out
            if self.scheme.ulysses > 1:
                out = self.a2a(new.out, scatter=2, gather=1, n=self.scheme.ulysses, group=self.ulysses_group)
                self.heads[out] = new.out
        self.replace(op.operation.results[0], out, lays[0])
        self.replace(op.operation.results[1], new.lse, Layout("heads", 1) if self.scheme.ulysses > 1 else seq(2))
        op.operation.erase()

    def on_attention_grad(self, op, lays) -> None:
        dout, q, k, v, out, lse = list(op.operation.operands)[:6]
        doc_pos = self.doc_pos(op, 6)
        hk = shape(k)[1]
        qh, kh, vh, outh, douth = self.split_heads(op, q, k, v, out, dout, kv=(False, True, True, False, False))
        u = self.scheme.ulysses
        with ir.InsertionPoint(op), op.location:
            if self.scheme.ring > 1:
                new = RingAttentionGradOp(douth, qh, kh, vh, outh, lse, *self.attention_flags(op, qh, kh),
                                          _str(self.ring_group), dq=qh.type, dk=kh.type, dv=vh.type,
                                          doc_pos=doc_pos)
            else:
                new = AttentionGradOp(douth, qh, kh, vh, outh, lse, *self.attention_flags(op, qh, kh),
                                      dq=qh.type, dk=kh.type, dv=vh.type, doc_pos=doc_pos)
            grads = [new.dq, new.dk, new.dv]
            for i, head in enumerate((qh, kh, vh) if u > 1 else ()):
                grads[i] = self.a2a(grads[i], scatter=2, gather=1, n=u, group=self.ulysses_group)
                m = self.kv_repeat.get(head, 1)
                if m > 1:   # sum the repeated heads' gradients back into their KV head
                    b, _, s, d = shape(grads[i])
                    split = aten("view", [grads[i], int_list_value([b, hk, m, s, d])],
                                 [with_shape(grads[i].type, [b, hk, m, s, d])]).results[0]
                    grads[i] = aten("sum.dim_IntList", [split, int_list_value([2]), const_bool(False), const_none()],
                                    [with_shape(grads[i].type, [b, hk, s, d])]).results[0]
        for old, g in zip(op.operation.results, grads):
            self.replace(old, g, lays[0])
        op.operation.erase()

    # ------------------------------------------------------------------ loss and label shift
    def on_loss(self, op, lays) -> None:
        x = list(op.operation.operands)
        ok, reduction = const_value(x[3])
        if reduction == 0:
            for r, lay in zip(op.operation.results, lays):
                self.layout[r] = lay
            op.operation.results[0].set_type(with_shape(op.operation.results[0].type,
                                                        local_shape(shape(op.operation.results[0]), lays[0], self.p)))
            return
        out, tw = op.operation.results
        with ir.InsertionPoint(op), op.location:
            local = ir.Operation.create("torch.aten.nll_loss_forward", results=[out.type, tw.type],
                                        operands=[x[0], x[1], x[2], const_int(2), x[4]])
            total = self.all_reduce(local.results[0])
            count = self.all_reduce(local.results[1])
            loss = aten("div.Tensor", [total, count], [out.type]).results[0] if reduction == 1 else total
        self.replace(out, loss, REP)
        self.replace(tw, count, REP)
        op.operation.erase()

    def on_halo(self, op, lays) -> None:
        pad = op.operation.operands[0].owner
        src, _, value = pad.operation.operands
        lay = self.layout[pad.operation.results[0]]
        with ir.InsertionPoint(op), op.location:
            shifted = HaloOp(src, _i64(lay.dim), _i64(lay.inner),
                             ir.FloatAttr.get(ir.F64Type.get(), float(const_value(value)[1])), _str("sp"),
                             out=src.type).out
        self.replace(op.operation.results[0], shifted, lays[0])
        op.operation.erase()
        if not list(pad.operation.results[0].uses):
            pad.operation.erase()

    # ------------------------------------------------------------------ results
    def on_return(self, op) -> None:
        names = strings(func_attr(self.func, "sp.results"))
        for i, (name, v) in enumerate(zip(names, op.operation.operands)):
            lay = self.layout.get(v, REP)
            if lay.kind == "partial":
                with ir.InsertionPoint(op), op.location:
                    if self.dp == 1:
                        r = self.all_reduce(v, "sp")
                    else:  # DDP semantics: the mean over data-parallel replicas of their sums over sp
                        r = aten("div.Scalar", [self.all_reduce(v, "world"), const_float(float(self.dp))],
                                 [v.type]).results[0]
                op.operation.operands[i] = r
            elif lay.kind != "rep":
                raise PassError(f"result {name} has layout {lay}; results must be replicated or partial",
                                op.location)


# identities on one rank (sp.halo is not: it still shifts in the fill value)
_FOLDABLE = COLLECTIVES | {SHARD_SLICE}


def _is_identity(v: ir.Value) -> bool:
    owner = v.owner
    return isinstance(owner, (ir.Operation, ir.OpView)) and op_name(owner) in IDENTITY


def _dict_items(attr) -> list[tuple[str, str]]:
    d = ir.DictAttr(attr)
    return [(d[i].name, ir.StringAttr(d[i].attr).value) for i in range(len(d))]


def indivisible(seq_len: int, sp: int) -> str | None:
    """Why sp ranks cannot hold equal shards of seq_len tokens, or None when they can."""
    if seq_len % sp == 0:
        return None
    return (f"sequence length {seq_len} is not divisible by sp={sp}: each rank must hold the same number of "
            f"tokens (try {seq_len - seq_len % sp} or {seq_len + sp - seq_len % sp})")


@dataclass
class PartitionSequence(Pass):
    """shard the sequence across sp ranks: local shapes and collectives"""
    name: ClassVar[str] = "sp-partition-sequence"
    sp: int = option(1, "sequence-parallel degree: the ranks that share one sequence", minimum=1)
    dp: int = option(1, "data-parallel degree: replicas with their own batches (world = sp x dp)", minimum=1)
    attention: str = option("auto", MODE_HELP)

    def validate(self) -> None:
        if mode_error(self.attention, self.sp):
            raise OptionError(f"{self.name}: {mode_error(self.attention, self.sp)}")

    def run(self, module_op) -> None:
        func = func_of(module_op)
        part = Partitioner(func, self.sp, self.dp, self.attention)
        part.run()
        i64 = ir.IntegerType.get_signless(64)
        mesh = {"sp": ir.IntegerAttr.get(i64, self.sp), "dp": ir.IntegerAttr.get(i64, self.dp)}
        if part.order != "contiguous":
            mesh["order"] = ir.StringAttr.get(part.order)
        if 1 < part.scheme.ulysses < self.sp:
            mesh["ulysses"] = ir.IntegerAttr.get(i64, part.scheme.ulysses)
        module_op.attributes["sp.mesh"] = ir.DictAttr.get(mesh)
        if part.costs:
            f64 = ir.F64Type.get()
            module_op.attributes["sp.attention_scheme"] = ir.DictAttr.get({
                "scheme": ir.StringAttr.get(str(part.scheme)),
                "bytes": ir.DictAttr.get({k: ir.FloatAttr.get(f64, v) for k, v in part.costs.items()})})
