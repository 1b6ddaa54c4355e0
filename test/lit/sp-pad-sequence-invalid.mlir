// sp-pad-sequence diagnostics: padding 8 tokens' steps from 6 is refused, at the offending op,
// wherever the padded positions could change the result.
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2},sp-pad-sequence{length=6})' 2>&1 | FileCheck %s
// It only pads.
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2},sp-pad-sequence{length=9})' 2>&1 | FileCheck %s --check-prefix=LONGER
// LONGER: {{.*}}sp-pad-sequence-invalid.mlir:[[# @LINE + 1]]:1: error: sp-pad-sequence: length=9 is longer than the captured sequence (8 tokens); it can only pad
func.func @not_causal(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,8],f32>, %wv: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:emb", "param:wk", "param:wv", "input:input_ids"], sp.results = ["loss"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int2, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %vf = torch.aten.mm %tok, %wv : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %v4 = torch.aten.view %vf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %v = torch.aten.transpose.int %v4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  // CHECK: {{.*}}sp-pad-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-pad-sequence: 6 tokens are padded to 8 for equal shards, which is exact only if every attention is causal (this one is not); use a length divisible by sp
  %o, %lse = "sp.attention"(%q, %k, %v) {causal = false, scale = 0.5 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %s = torch.aten.sum %o, %none : !torch.vtensor<[2,4,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
func.func @ignores_another_label(%emb: !torch.vtensor<[32,32],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>) attributes {sp.args = ["param:emb", "input:input_ids", "input:labels"], sp.results = ["loss", "grad:emb"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -1
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %none = torch.constant.none
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  %shifted = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,9],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %shifted, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,32],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,32],f32>
  %l2 = torch.prim.ListConstruct %int16, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
  %logits = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[16,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[16,32],f32>
  // CHECK: {{.*}}sp-pad-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-pad-sequence: 6 tokens are padded to 8 for equal shards, which is exact only if the loss ignores label -100 (this one ignores -1); use a length divisible by sp
  %loss, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %one = torch.aten.ones_like %loss, %none, %none, %none, %false, %none : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  %gl = torch.aten.nll_loss_backward %one, %lp, %tgt, %none, %int1, %int-100, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[16,32],f32>
  %gx = torch.aten._log_softmax_backward_data %gl, %lp, %int1, %int6 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16,32],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,32],f32>
  %l3 = torch.prim.ListConstruct %int0, %int16, %int32 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %gx3 = torch.aten.view %gx, %l2 : !torch.vtensor<[16,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %gemb = torch.aten.mm %gx3, %emb : !torch.vtensor<[16,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[16,32],f32>
  %tgx = torch.aten.t %gx : !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,16],f32>
  %gw = torch.aten.mm %tgx, %logits : !torch.vtensor<[32,16],f32>, !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,32],f32>
  return %loss, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>
}
// -----
func.func @shifts_ids(%emb: !torch.vtensor<[32,32],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>) attributes {sp.args = ["param:emb", "input:input_ids", "input:labels"], sp.results = ["loss", "grad:emb"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -100
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %none = torch.constant.none
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %ids, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  // CHECK: {{.*}}sp-pad-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-pad-sequence: 6 tokens are padded to 8 for equal shards, which is exact only if only the labels are shifted along the sequence (this shifts another value); use a length divisible by sp
  %shifted = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,9],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %shifted, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,32],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,32],f32>
  %l2 = torch.prim.ListConstruct %int16, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
  %logits = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[16,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[16,32],f32>
  %loss, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %one = torch.aten.ones_like %loss, %none, %none, %none, %false, %none : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  %gl = torch.aten.nll_loss_backward %one, %lp, %tgt, %none, %int1, %int-100, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[16,32],f32>
  %gx = torch.aten._log_softmax_backward_data %gl, %lp, %int1, %int6 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16,32],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,32],f32>
  %l3 = torch.prim.ListConstruct %int0, %int16, %int32 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %gx3 = torch.aten.view %gx, %l2 : !torch.vtensor<[16,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %gemb = torch.aten.mm %gx3, %emb : !torch.vtensor<[16,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[16,32],f32>
  %tgx = torch.aten.t %gx : !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,16],f32>
  %gw = torch.aten.mm %tgx, %logits : !torch.vtensor<[32,16],f32>, !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,32],f32>
  return %loss, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>
}
// -----
func.func @mean_feeds_loss(%emb: !torch.vtensor<[32,32],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>) attributes {sp.args = ["param:emb", "input:input_ids", "input:labels"], sp.results = ["loss", "grad:emb"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -100
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %none = torch.constant.none
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  %shifted = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,9],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %shifted, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,32],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,32],f32>
  %l2 = torch.prim.ListConstruct %int16, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
  %logits = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[16,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[16,32],f32>
  %loss, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  // CHECK: {{.*}}sp-pad-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-pad-sequence: 6 tokens are padded to 8 for equal shards, which is exact only if nothing but the loss sums over the sequence (this sum feeds the loss); use a length divisible by sp
  %m = torch.aten.mean %x, %none : !torch.vtensor<[2,8,32],f32>, !torch.none -> !torch.vtensor<[],f32>
  %total = torch.aten.add.Tensor %loss, %m, %int1 : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[],f32>
  %one = torch.aten.ones_like %loss, %none, %none, %none, %false, %none : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  %gl = torch.aten.nll_loss_backward %one, %lp, %tgt, %none, %int1, %int-100, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[16,32],f32>
  %gx = torch.aten._log_softmax_backward_data %gl, %lp, %int1, %int6 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16,32],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,32],f32>
  %l3 = torch.prim.ListConstruct %int0, %int16, %int32 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %gx3 = torch.aten.view %gx, %l2 : !torch.vtensor<[16,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %gemb = torch.aten.mm %gx3, %emb : !torch.vtensor<[16,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[16,32],f32>
  %tgx = torch.aten.t %gx : !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,16],f32>
  %gw = torch.aten.mm %tgx, %logits : !torch.vtensor<[32,16],f32>, !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,32],f32>
  return %total, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>
}
// -----
// CHECK: {{.*}}sp-pad-sequence-invalid.mlir:[[# @LINE + 1]]:1: error: sp-pad-sequence: 6 tokens are padded to 8 for equal shards, which is exact only if the loss is cross-entropy over the labels with ignore_index -100; use a length divisible by sp
func.func @no_cross_entropy(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,8],f32>, %wv: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:emb", "param:wk", "param:wv", "input:input_ids"], sp.results = ["loss"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int2, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %vf = torch.aten.mm %tok, %wv : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %v4 = torch.aten.view %vf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %v = torch.aten.transpose.int %v4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %o, %lse = "sp.attention"(%q, %k, %v) {causal = true, scale = 0.5 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %s = torch.aten.sum %o, %none : !torch.vtensor<[2,4,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
