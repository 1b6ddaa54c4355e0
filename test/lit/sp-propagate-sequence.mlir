// sp-propagate-sequence: the layout of every value. Token inputs are seq<1>, parameters and
// buffers rep; each op's rule gives `sp.layout` (one entry per result) and, where an operand must
// change layout first, `sp.demand` (operand index -> layout). The func gets `sp.arg_layouts` and
// `sp.seq_len`.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence)' | FileCheck %s

// CHECK-LABEL: func.func @seeds
// CHECK-SAME:    sp.arg_layouts = ["rep", "seq<1>", "seq<1>"]
// CHECK-SAME:    sp.args = ["param:emb", "input:input_ids", "input:labels"]
// CHECK-SAME:    sp.seq_len = 8 : i64
// CHECK-NOT:     torch.constant.int -1 {sp.layout
// CHECK:         torch.aten.embedding %{{.*}} {sp.layout = ["seq<1>"]} : {{.*}} -> !torch.vtensor<[2,8,16],f32>
// CHECK-NOT:     sp.demand
func.func @seeds(%emb: !torch.vtensor<[32,16],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["param:emb", "input:input_ids", "input:labels"], sp.results = ["x"]} {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  return %x : !torch.vtensor<[2,8,16],f32>
}
// -----
// Shape ops move the sequence dim: [B,S,E] -> [B*S,E] is seq<0>, -> [B,S*E] is seq<1,16> (16
// elements per token), heads split keeps it, transpose/permute/unsqueeze/select renumber it.
// Contractions: seq x rep keeps the token dim; a product over the token dim is partial.
// CHECK-LABEL: func.func @shapes
// CHECK-SAME:    sp.arg_layouts = ["rep", "rep", "seq<1>"]
// CHECK:         %[[X:[0-9]+]] = torch.aten.embedding {{.*}}{sp.layout = ["seq<1>"]}
// CHECK:         %[[TOK:[0-9]+]] = torch.aten.view %[[X]], %{{[0-9]+}} {sp.layout = ["seq<0>"]} : {{.*}} -> !torch.vtensor<[16,16],f32>
// CHECK:         torch.aten.view %[[X]], %{{[0-9]+}} {sp.layout = ["seq<1,16>"]} : {{.*}} -> !torch.vtensor<[2,128],f32>
// CHECK:         %[[H:[0-9]+]] = torch.aten.view %[[X]], %{{[0-9]+}} {sp.layout = ["seq<1>"]} : {{.*}} -> !torch.vtensor<[2,8,4,4],f32>
// CHECK:         torch.aten.transpose.int %[[H]], %int1, %int2 {sp.layout = ["seq<2>"]}
// CHECK:         torch.aten.permute %[[X]], %{{[0-9]+}} {sp.layout = ["seq<0>"]} : {{.*}} -> !torch.vtensor<[8,2,16],f32>
// CHECK:         torch.aten.unsqueeze %[[X]], %int0 {sp.layout = ["seq<2>"]}
// CHECK:         torch.aten.select.int %[[X]], %int0, %int1 {sp.layout = ["seq<0>"]}
// CHECK:         %[[Y:[0-9]+]] = torch.aten.mm %[[TOK]], %arg1 {sp.layout = ["seq<0>"]}
// CHECK:         %[[TT:[0-9]+]] = torch.aten.t %[[TOK]] {sp.layout = ["seq<1>"]}
// CHECK:         torch.aten.mm %[[TT]], %[[Y]] {sp.layout = ["partial"]}
// CHECK-NOT:     sp.demand
func.func @shapes(%emb: !torch.vtensor<[32,16],f32>, %w: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[16,8],f32> attributes {sp.args = ["param:emb", "param:w", "input:input_ids"], sp.results = ["grad:w"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %int128 = torch.constant.int 128
  %false = torch.constant.bool false
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l1 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tokens = torch.aten.view %x, %l1 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %l2 = torch.prim.ListConstruct %int2, %int128 : (!torch.int, !torch.int) -> !torch.list<int>
  %flat = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,128],f32>
  %l4 = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %heads = torch.aten.view %x, %l4 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %bhsd = torch.aten.transpose.int %heads, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %perm = torch.prim.ListConstruct %int1, %int0, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %sbe = torch.aten.permute %x, %perm : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[8,2,16],f32>
  %u = torch.aten.unsqueeze %x, %int0 : !torch.vtensor<[2,8,16],f32>, !torch.int -> !torch.vtensor<[1,2,8,16],f32>
  %sel = torch.aten.select.int %x, %int0, %int1 : !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32>
  %y = torch.aten.mm %tokens, %w : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %tt = torch.aten.t %tokens : !torch.vtensor<[16,16],f32> -> !torch.vtensor<[16,16],f32>
  %gw = torch.aten.mm %tt, %y : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  return %gw : !torch.vtensor<[16,8],f32>
}
// -----
// Broadcasting elementwise ops align dims from the right. A replicated operand that spans the
// sequence dim must be sliced to this rank's block (demand seq<d>); one that broadcasts along it
// ([16], [2,1,16]) is used as is.
// CHECK-LABEL: func.func @elementwise
// CHECK-SAME:    sp.arg_layouts = ["seq<1>", "rep", "rep", "rep", "rep"]
// CHECK:         %[[A:[0-9]+]] = torch.aten.add.Tensor %{{[0-9]+}}, %arg2, %int1 {sp.demand = {"1" = "seq<0>"}, sp.layout = ["seq<1>"]}
// CHECK:         %[[B:[0-9]+]] = torch.aten.mul.Tensor %[[A]], %arg3 {sp.layout = ["seq<1>"]}
// CHECK:         %[[C:[0-9]+]] = torch.aten.mul.Tensor %arg4, %[[B]] {sp.layout = ["seq<1>"]}
// CHECK:         torch.aten.silu %[[C]] {sp.layout = ["seq<1>"]}
func.func @elementwise(%ids: !torch.vtensor<[2,8],si64>, %emb: !torch.vtensor<[32,16],f32>, %pos: !torch.vtensor<[8,16],f32>, %bias: !torch.vtensor<[16],f32>, %one: !torch.vtensor<[2,1,16],f32>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["input:input_ids", "param:emb", "buffer:pos", "param:bias", "param:one"], sp.results = ["y"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %a = torch.aten.add.Tensor %x, %pos, %int1 : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[8,16],f32>, !torch.int -> !torch.vtensor<[2,8,16],f32>
  %b = torch.aten.mul.Tensor %a, %bias : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[2,8,16],f32>
  %c = torch.aten.mul.Tensor %one, %b : !torch.vtensor<[2,1,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32>
  %d = torch.aten.silu %c : !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32>
  return %d : !torch.vtensor<[2,8,16],f32>
}
// -----
// A sum over the sequence is partial (each rank holds a summand). Linear ops keep it partial
// (x scalar, partial + partial, rep * partial); anything else needs the full sum first
// (demand rep: an all-reduce).
// CHECK-LABEL: func.func @partial_algebra
// CHECK:         %[[S:[0-9]+]] = torch.aten.sum.dim_IntList {{.*}}{sp.layout = ["partial"]}
// CHECK:         %[[M:[0-9]+]] = torch.aten.mul.Scalar %[[S]], %{{.*}} {sp.layout = ["partial"]}
// CHECK:         %[[P:[0-9]+]] = torch.aten.add.Tensor %[[M]], %[[S]], %int1 {sp.layout = ["partial"]}
// CHECK:         torch.aten.mul.Tensor %arg2, %[[P]] {sp.layout = ["partial"]}
// CHECK:         torch.aten.rsqrt %[[P]] {sp.demand = {"0" = "rep"}, sp.layout = ["rep"]}
// CHECK:         torch.aten.add.Tensor %arg2, %[[P]], %int1 {sp.demand = {"1" = "rep"}, sp.layout = ["rep"]}
func.func @partial_algebra(%ids: !torch.vtensor<[2,8],si64>, %emb: !torch.vtensor<[32,16],f32>, %w: !torch.vtensor<[16],f32>) -> (!torch.vtensor<[16],f32>, !torch.vtensor<[16],f32>, !torch.vtensor<[16],f32>) attributes {sp.args = ["input:input_ids", "param:emb", "param:w"], sp.results = ["a", "b", "c"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %half = torch.constant.float 5.000000e-01
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %dims = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %s = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[16],f32>
  %m = torch.aten.mul.Scalar %s, %half : !torch.vtensor<[16],f32>, !torch.float -> !torch.vtensor<[16],f32>
  %p = torch.aten.add.Tensor %m, %s, %int1 : !torch.vtensor<[16],f32>, !torch.vtensor<[16],f32>, !torch.int -> !torch.vtensor<[16],f32>
  %q = torch.aten.mul.Tensor %w, %p : !torch.vtensor<[16],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[16],f32>
  %r = torch.aten.rsqrt %p : !torch.vtensor<[16],f32> -> !torch.vtensor<[16],f32>
  %t = torch.aten.add.Tensor %w, %p, %int1 : !torch.vtensor<[16],f32>, !torch.vtensor<[16],f32>, !torch.int -> !torch.vtensor<[16],f32>
  return %q, %r, %t : !torch.vtensor<[16],f32>, !torch.vtensor<[16],f32>, !torch.vtensor<[16],f32>
}
// -----
// Computation on replicated values only (RoPE tables from arange) stays replicated, whatever the op.
// CHECK-LABEL: func.func @replicated
// CHECK:         torch.aten.arange {{.*}}{sp.layout = ["rep"]}
// CHECK:         torch.aten.view {{.*}}{sp.layout = ["rep"]}
// CHECK:         torch.aten.mul.Tensor {{.*}}{sp.layout = ["rep"]}
// CHECK:         torch.aten.cumsum {{.*}}{sp.layout = ["rep"]}
// CHECK-NOT:     sp.demand
func.func @replicated(%ids: !torch.vtensor<[2,8],si64>, %inv: !torch.vtensor<[8],f32>) -> !torch.vtensor<[8,8],f32> attributes {sp.args = ["input:input_ids", "buffer:inv_freq"], sp.results = ["cos"]} {
  %int8 = torch.constant.int 8
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %ar = torch.aten.arange %int8, %none, %none, %cpu, %false : !torch.int, !torch.none, !torch.none, !torch.Device, !torch.bool -> !torch.vtensor<[8],si64>
  %l = torch.prim.ListConstruct %int8, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %col = torch.aten.view %ar, %l : !torch.vtensor<[8],si64>, !torch.list<int> -> !torch.vtensor<[8,1],si64>
  %f = torch.aten.mul.Tensor %col, %inv : !torch.vtensor<[8,1],si64>, !torch.vtensor<[8],f32> -> !torch.vtensor<[8,8],f32>
  %c = torch.aten.cumsum %f, %int1, %none : !torch.vtensor<[8,8],f32>, !torch.int, !torch.none -> !torch.vtensor<[8,8],f32>
  return %c : !torch.vtensor<[8,8],f32>
}
// -----
// Attention reads q/k/v sharded along their sequence dim 2; its softmax statistics are per head
// (heads<1>: only the matching attention_grad may read them). The gradients are seq<2> again.
// CHECK-LABEL: func.func @attention
// CHECK:         %[[Q:[0-9]+]] = torch.aten.transpose.int {{.*}}{sp.layout = ["seq<2>"]}
// CHECK:         %[[A:[0-9]+]]:2 = "sp.attention"(%[[Q]], %[[Q]], %[[Q]]) {causal = true, kv_groups = 1 : i64, scale = 5.000000e-01 : f64, sp.layout = ["seq<2>", "heads<1>"], window = 0 : i64}
// CHECK:         %[[G:[0-9]+]]:3 = "sp.attention_grad"(%[[A]]#0, %[[Q]], %[[Q]], %[[Q]], %[[A]]#0, %[[A]]#1) {{{.*}}sp.layout = ["seq<2>", "seq<2>", "seq<2>"], window = 0 : i64}
// CHECK:         torch.aten.transpose.int %[[G]]#0, %int1, %int2 {sp.layout = ["seq<1>"]}
func.func @attention(%ids: !torch.vtensor<[2,8],si64>, %emb: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,4,4],f32> attributes {sp.args = ["input:input_ids", "param:emb"], sp.results = ["dq"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %false = torch.constant.bool false
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l4 = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %xv = torch.aten.view %x, %l4 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %xv, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %o, %lse = "sp.attention"(%q, %q, %q) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %g:3 = "sp.attention_grad"(%o, %q, %q, %q, %o, %lse) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>)
  %back = torch.aten.transpose.int %g#0, %int1, %int2 : !torch.vtensor<[2,4,8,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,8,4,4],f32>
  return %back : !torch.vtensor<[2,8,4,4],f32>
}
// -----
// The label shift (pad the end by one, slice from 1) is halo<1,1> then seq<1> again; a full slice
// of the sequence dim is shard-local. The mean loss is replicated; reduction=none is per token.
// CHECK-LABEL: func.func @loss
// CHECK:         torch.aten.clone %arg1, %none {sp.layout = ["seq<1>"]}
// CHECK:         %[[PAD:[0-9]+]] = torch.aten.constant_pad_nd %arg2, %{{[0-9]+}}, %{{.*}} {sp.layout = ["halo<1,1>"]} : {{.*}} -> !torch.vtensor<[2,9],si64>
// CHECK:         %[[SH:[0-9]+]] = torch.aten.slice.Tensor %[[PAD]], %int1, %int1, %{{.*}} {sp.layout = ["seq<1>"]}
// CHECK:         %[[TGT:[0-9]+]] = torch.aten.view %[[SH]], %{{[0-9]+}} {sp.layout = ["seq<0>"]}
// CHECK:         torch.aten.slice.Tensor %{{[0-9]+}}, %int1, %int0, %{{.*}} {sp.layout = ["seq<1>"]}
// CHECK:         %[[LP:[0-9]+]] = torch.aten._log_softmax %{{[0-9]+}}, %int1, %false {sp.layout = ["seq<0>"]}
// CHECK:         torch.aten.nll_loss_forward %[[LP]], %[[TGT]], %none, %int1, %int-100 {sp.layout = ["rep", "rep"]}
// CHECK:         torch.aten.nll_loss_forward %[[LP]], %[[TGT]], %none, %int0, %int-100 {sp.layout = ["seq<0>", "rep"]}
func.func @loss(%emb: !torch.vtensor<[32,32],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[16],f32>) attributes {sp.args = ["param:emb", "input:input_ids", "input:labels"], sp.results = ["loss", "per_token"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -100
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %none = torch.constant.none
  %fill = torch.constant.float -1.000000e+02
  %ids2 = torch.aten.clone %ids, %none : !torch.vtensor<[2,8],si64>, !torch.none -> !torch.vtensor<[2,8],si64>
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  %shifted = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,9],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %shifted, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %all = torch.aten.slice.Tensor %ids2, %int1, %int0, %intmax, %int1 : !torch.vtensor<[2,8],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %x = torch.aten.embedding %emb, %all, %int-1, %false, %false : !torch.vtensor<[32,32],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,32],f32>
  %l2 = torch.prim.ListConstruct %int16, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
  %flat = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %lp = torch.aten._log_softmax %flat, %int1, %false : !torch.vtensor<[16,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[16,32],f32>
  %loss, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %each, %tw0 = torch.aten.nll_loss_forward %lp, %tgt, %none, %int0, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[16],f32>, !torch.vtensor<[],f32>
  return %loss, %each : !torch.vtensor<[],f32>, !torch.vtensor<[16],f32>
}
// -----
// Per-token ops (reductions over features, softmax, layer norm, split/cat along features) keep
// seq<1>, and so do tensor lists; reductions over the sequence are partial, over the batch they
// renumber the sequence dim.
// CHECK-LABEL: func.func @per_token
// CHECK:         torch.aten.mean.dim {{.*}}{sp.layout = ["seq<1>"]} : {{.*}} -> !torch.vtensor<[2,8,1],f32>
// CHECK:         torch.aten._softmax {{.*}}{sp.layout = ["seq<1>"]}
// CHECK:         torch.aten.native_layer_norm {{.*}}{sp.layout = ["seq<1>", "seq<1>", "seq<1>"]}
// CHECK:         torch.aten.split.Tensor {{.*}}{sp.layout = ["seq<1>"]} : {{.*}} -> !torch.list<vtensor>
// CHECK:         torch.prim.ListUnpack {{.*}}{sp.layout = ["seq<1>", "seq<1>"]}
// CHECK:         torch.prim.ListConstruct {{.*}}{sp.layout = ["seq<1>"]} : {{.*}} -> !torch.list<vtensor>
// CHECK:         torch.aten.cat {{.*}}{sp.layout = ["seq<1>"]}
// CHECK:         %[[POOL:[0-9]+]] = torch.aten.mean.dim {{.*}}{sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[2,16],f32>
// CHECK:         torch.aten.sum.dim_IntList {{.*}}{sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[2,16],f32>
// CHECK:         torch.aten.sum %{{[0-9]+}}, %none {sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[],f32>
// CHECK:         torch.aten.sum.dim_IntList {{.*}}{sp.layout = ["seq<0>"]} : {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK:         torch.aten.mean.dim %[[POOL]], {{.*}}{sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[16],f32>
func.func @per_token(%ids: !torch.vtensor<[2,8],si64>, %emb: !torch.vtensor<[32,16],f32>, %g: !torch.vtensor<[16],f32>) -> !torch.vtensor<[16],f32> attributes {sp.args = ["input:input_ids", "param:emb", "param:g"], sp.results = ["m"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %true = torch.constant.bool true
  %false = torch.constant.bool false
  %none = torch.constant.none
  %eps = torch.constant.float 1.000000e-05
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %last = torch.prim.ListConstruct %int-1 : (!torch.int) -> !torch.list<int>
  %ms = torch.aten.mean.dim %x, %last, %true, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,8,1],f32>
  %sm = torch.aten._softmax %x, %int-1, %false : !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %ns = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %ln:3 = torch.aten.native_layer_norm %sm, %ns, %g, %none, %eps : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.vtensor<[16],f32>, !torch.none, !torch.float -> !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,1],f32>, !torch.vtensor<[2,8,1],f32>
  %parts = torch.aten.split.Tensor %ln#0, %int8, %int-1 : !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.int -> !torch.list<vtensor>
  %a, %b = torch.prim.ListUnpack %parts : !torch.list<vtensor> -> !torch.vtensor<[2,8,8],f32>, !torch.vtensor<[2,8,8],f32>
  %pair = torch.prim.ListConstruct %b, %a : (!torch.vtensor<[2,8,8],f32>, !torch.vtensor<[2,8,8],f32>) -> !torch.list<vtensor>
  %cat = torch.aten.cat %pair, %int-1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,8,16],f32>
  %seqdim = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %pooled = torch.aten.mean.dim %cat, %seqdim, %false, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,16],f32>
  %bsum = torch.aten.sum.dim_IntList %cat, %seqdim, %false, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,16],f32>
  %tot = torch.aten.sum %x, %none : !torch.vtensor<[2,8,16],f32>, !torch.none -> !torch.vtensor<[],f32>
  %bdim = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %keep = torch.aten.sum.dim_IntList %x, %bdim, %false, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[8,16],f32>
  %m = torch.aten.mean.dim %pooled, %bdim, %false, %none : !torch.vtensor<[2,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[16],f32>
  return %m : !torch.vtensor<[16],f32>
}
// -----
// Dropout: output and mask take the input's layout (each rank masks its own shard); its backward
// is elementwise in the gradient and the mask.
// CHECK-LABEL: func.func @dropout
// CHECK:         %[[OUT:[0-9a-z_]+]], %[[MASK:[0-9a-z_]+]] = torch.aten.native_dropout %{{[0-9]+}}, %float1.000000e-01, %true {sp.layout = ["seq<1>", "seq<1>"]} : {{.*}} -> !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],i1>
// CHECK:         torch.aten.native_dropout_backward %[[OUT]], %[[MASK]], %{{.*}} {sp.layout = ["seq<1>"]}
// CHECK-NOT:     sp.demand
func.func @dropout(%emb: !torch.vtensor<[32,16],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["param:emb", "input:input_ids"], sp.results = ["g"]} {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %p = torch.constant.float 1.000000e-01
  %scale = torch.constant.float 1.1111111111111112
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %out, %mask = torch.aten.native_dropout %x, %p, %true : !torch.vtensor<[2,8,16],f32>, !torch.float, !torch.bool -> !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],i1>
  %g = torch.aten.native_dropout_backward %out, %mask, %scale : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],i1>, !torch.float -> !torch.vtensor<[2,8,16],f32>
  return %g : !torch.vtensor<[2,8,16],f32>
}
// -----
// Learned positions (GPT-2's wpe): the positions are built replicated and embedded whole; the
// embedding gradient arrives sharded, so its indices are demanded sharded the same way and each rank
// scatters its own rows (a partial sum).
// CHECK-LABEL: func.func @learned_positions
// CHECK:         torch.aten.embedding %arg0, %{{[0-9]+}}, {{.*}} {sp.layout = ["rep"]}
// CHECK:         torch.aten.embedding_dense_backward %{{[0-9]+}}, %{{[0-9]+}}, {{.*}} {sp.demand = {"1" = "seq<1>"}, sp.layout = ["partial"]}
func.func @learned_positions(%wpe: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>, %tok: !torch.vtensor<[2,8,8],f32>) -> (!torch.vtensor<[2,8,8],f32>, !torch.vtensor<[16,8],f32>) attributes {sp.args = ["param:wpe", "input:input_ids", "input:labels"], sp.results = ["x", "grad:wpe"]} {
  %int0 = torch.constant.int 0
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %cpu = torch.constant.device "cpu"
  %pos = torch.aten.arange.start %int0, %int8, %none, %none, %cpu, %false : !torch.int, !torch.int, !torch.none, !torch.none, !torch.Device, !torch.bool -> !torch.vtensor<[8],si64>
  %pos1 = torch.aten.unsqueeze %pos, %int0 : !torch.vtensor<[8],si64>, !torch.int -> !torch.vtensor<[1,8],si64>
  %pe = torch.aten.embedding %wpe, %pos1, %int-1, %false, %false : !torch.vtensor<[16,8],f32>, !torch.vtensor<[1,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[1,8,8],f32>
  %int1 = torch.constant.int 1
  %x = torch.aten.add.Tensor %tok, %pe, %int1 : !torch.vtensor<[2,8,8],f32>, !torch.vtensor<[1,8,8],f32>, !torch.int -> !torch.vtensor<[2,8,8],f32>
  %bdim = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %true = torch.constant.bool true
  %g = torch.aten.sum.dim_IntList %x, %bdim, %true, %none : !torch.vtensor<[2,8,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,8,8],f32>
  %gw = torch.aten.embedding_dense_backward %g, %pos1, %int16, %int-1, %false : !torch.vtensor<[1,8,8],f32>, !torch.vtensor<[1,8],si64>, !torch.int, !torch.int, !torch.bool -> !torch.vtensor<[16,8],f32>
  return %x, %gw : !torch.vtensor<[2,8,8],f32>, !torch.vtensor<[16,8],f32>
}
