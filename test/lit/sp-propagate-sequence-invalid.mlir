// sp-propagate-sequence diagnostics: every op the sequence cannot be sharded through is an error
// at that op's location, naming the op and the layouts involved (no silent fallback).
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence)' 2>&1 | FileCheck %s

// === the step's signature

// CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:1: error: sp-propagate-sequence: the function has no 'sp.args' attribute; it is set by the importer
func.func @no_signature(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64> {
  return %ids : !torch.vtensor<[2,8],si64>
}
// -----
// CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:1: error: sp-propagate-sequence: the step has no token inputs (sp.args names none 'input:')
func.func @no_inputs(%w: !torch.vtensor<[4,4],f32>) -> !torch.vtensor<[4,4],f32> attributes {sp.args = ["param:w"], sp.results = ["w"]} {
  return %w : !torch.vtensor<[4,4],f32>
}
// -----
// CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:1: error: sp-propagate-sequence: input labels has sequence length 7, expected 8
func.func @seq_len_mismatch(%ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,7],si64>) -> !torch.vtensor<[2,8],si64> attributes {sp.args = ["input:input_ids", "input:labels"], sp.results = ["ids"]} {
  return %ids : !torch.vtensor<[2,8],si64>
}
// -----
// === elementwise ops and lists
func.func @heads_layout_read(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,4,8],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["e"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %t = torch.aten.transpose.int %v, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %o, %lse = "sp.attention"(%t, %t, %t) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.exp: operand 0 has layout heads<1>, which only its producer's partner op may read
  %e = torch.aten.exp %lse : !torch.vtensor<[2,4,8],f32> -> !torch.vtensor<[2,4,8],f32>
  return %e : !torch.vtensor<[2,4,8],f32>
}
// -----
func.func @halo_layout_read(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,9],si64> attributes {sp.args = ["input:labels"], sp.results = ["p"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %ids, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.neg: operand 0 has layout halo<1,1>, which only its producer's partner op may read
  %n = torch.aten.neg %padded : !torch.vtensor<[2,9],si64> -> !torch.vtensor<[2,9],si64>
  return %n : !torch.vtensor<[2,9],si64>
}
// -----
func.func @different_dims(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,8],f32>) -> !torch.vtensor<[2,8,8],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["y"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,8],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,8],f32>
  %xt = torch.aten.transpose.int %x, %int1, %int2 : !torch.vtensor<[2,8,8],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,8,8],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.add.Tensor: operands are sharded along different dims [(1, 1), (2, 1)]
  %y = torch.aten.add.Tensor %x, %xt, %int1 : !torch.vtensor<[2,8,8],f32>, !torch.vtensor<[2,8,8],f32>, !torch.int -> !torch.vtensor<[2,8,8],f32>
  return %y : !torch.vtensor<[2,8,8],f32>
}
// -----
func.func @no_rule(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64> attributes {sp.args = ["input:input_ids"], sp.results = ["c"]} {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.cumsum: no sequence-sharding rule for this op (operand layouts: seq<1>)
  %c = torch.aten.cumsum %ids, %int1, %none : !torch.vtensor<[2,8],si64>, !torch.int, !torch.none -> !torch.vtensor<[2,8],si64>
  return %c : !torch.vtensor<[2,8],si64>
}
// -----
func.func @list_layouts(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[4,8],si64> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["c"]} {
  %int0 = torch.constant.int 0
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: prim.ListConstruct: list elements have different layouts ['rep', 'seq<1>']
  %l = torch.prim.ListConstruct %ids, %w : (!torch.vtensor<[2,8],si64>, !torch.vtensor<[2,8],si64>) -> !torch.list<vtensor>
  %c = torch.aten.cat %l, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[4,8],si64>
  return %c : !torch.vtensor<[4,8],si64>
}
// -----
// === shape ops
func.func @reshape_splits_sequence(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,2,4],si64> attributes {sp.args = ["input:input_ids"], sp.results = ["v"]} {
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %l = torch.prim.ListConstruct %int2, %int2, %int4 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.view: reshape [2, 8] -> [2, 2, 4] splits the sequence dim (layout seq<1>) across dims
  %v = torch.aten.view %ids, %l : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[2,2,4],si64>
  return %v : !torch.vtensor<[2,2,4],si64>
}
// -----
func.func @reshape_heads(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[64],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["v"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int64 = torch.constant.int 64
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %t = torch.aten.transpose.int %v, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %o, %lse = "sp.attention"(%t, %t, %t) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %l1 = torch.prim.ListConstruct %int64 : (!torch.int) -> !torch.list<int>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.view: cannot reshape a value with layout heads<1>
  %f = torch.aten.view %lse, %l1 : !torch.vtensor<[2,4,8],f32>, !torch.list<int> -> !torch.vtensor<[64],f32>
  return %f : !torch.vtensor<[64],f32>
}
// -----
func.func @reduce_heads(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["s"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int64 = torch.constant.int 64
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %t = torch.aten.transpose.int %v, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %o, %lse = "sp.attention"(%t, %t, %t) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %none = torch.constant.none
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.sum: cannot reduce a value with layout heads<1>
  %s = torch.aten.sum %lse, %none : !torch.vtensor<[2,4,8],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
func.func @slice_sequence(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64> attributes {sp.args = ["input:input_ids"], sp.results = ["s"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.slice.Tensor: slicing the sequence dim 1 (0:4:1) is not shard-local; shift labels by padding then slicing, as transformers does
  %s = torch.aten.slice.Tensor %ids, %int1, %int0, %int4, %int1 : !torch.vtensor<[2,8],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4],si64>
  return %s : !torch.vtensor<[2,4],si64>
}
// -----
func.func @halo_slice_width(%labels: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,9],si64> attributes {sp.args = ["input:labels"], sp.results = ["s"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %intmax = torch.constant.int 9223372036854775807
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int0, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,10],si64>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.slice.Tensor: a sequence padded at the end must be sliced back by the same width (a label shift)
  %s = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,10],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,9],si64>
  return %s : !torch.vtensor<[2,9],si64>
}
// -----
func.func @pad_front(%labels: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,9],si64> attributes {sp.args = ["input:labels"], sp.results = ["p"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.constant_pad_nd: padding the sequence dim by (1, 0) is not supported; only a pad at the end followed by a slice (a label shift) is
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  return %padded : !torch.vtensor<[2,9],si64>
}
// -----
func.func @select_sequence(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2],si64> attributes {sp.args = ["input:input_ids"], sp.results = ["s"]} {
  %int1 = torch.constant.int 1
  %int-1 = torch.constant.int -1
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.select.int: selecting one position of the sequence dim is not shard-local
  %s = torch.aten.select.int %ids, %int1, %int-1 : !torch.vtensor<[2,8],si64>, !torch.int, !torch.int -> !torch.vtensor<[2],si64>
  return %s : !torch.vtensor<[2],si64>
}
// -----
func.func @cat_sequence(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,16],si64> attributes {sp.args = ["input:input_ids"], sp.results = ["c"]} {
  %int1 = torch.constant.int 1
  %l = torch.prim.ListConstruct %ids, %ids : (!torch.vtensor<[2,8],si64>, !torch.vtensor<[2,8],si64>) -> !torch.list<vtensor>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.cat: concatenating along the sequence dim is not shard-local
  %c = torch.aten.cat %l, %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,16],si64>
  return %c : !torch.vtensor<[2,16],si64>
}
// -----
func.func @split_sequence(%ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64> attributes {sp.args = ["input:input_ids"], sp.results = ["a"]} {
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.split.Tensor: splitting along the sequence dim is not shard-local
  %parts = torch.aten.split.Tensor %ids, %int4, %int1 : !torch.vtensor<[2,8],si64>, !torch.int, !torch.int -> !torch.list<vtensor>
  %a, %b = torch.prim.ListUnpack %parts : !torch.list<vtensor> -> !torch.vtensor<[2,4],si64>, !torch.vtensor<[2,4],si64>
  return %a : !torch.vtensor<[2,4],si64>
}
// -----
func.func @slice_backward_sequence(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,9,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["g"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int8 = torch.constant.int 8
  %int9 = torch.constant.int 9
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %sizes = torch.prim.ListConstruct %int2, %int9, %int16 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.slice_backward: the gradient of a sequence slice is not shard-local
  %g = torch.operator "torch.aten.slice_backward"(%x, %sizes, %int1, %int0, %int8, %int1) : (!torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.int, !torch.int, !torch.int, !torch.int) -> !torch.vtensor<[2,9,16],f32>
  return %g : !torch.vtensor<[2,9,16],f32>
}
// -----
// === reductions, softmax, norms
func.func @softmax_sequence(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["s"]} {
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten._softmax: softmax over the sequence dim is not shard-local (attention must go through SDPA)
  %s = torch.aten._softmax %x, %int1, %false : !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  return %s : !torch.vtensor<[2,8,16],f32>
}
// -----
func.func @softmax_backward_sequence(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["g"]} {
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten._log_softmax_backward_data: softmax over the sequence dim is not shard-local
  %g = torch.aten._log_softmax_backward_data %x, %x, %int1, %int6 : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,8,16],f32>
  return %g : !torch.vtensor<[2,8,16],f32>
}
// -----
func.func @layer_norm_sequence(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>, %g: !torch.vtensor<[8,16],f32>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["input:input_ids", "param:w", "param:g"], sp.results = ["y"]} {
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %eps = torch.constant.float 1.000000e-05
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %ns = torch.prim.ListConstruct %int8, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.native_layer_norm: layer norm over the sequence dim is not shard-local
  %ln:3 = torch.aten.native_layer_norm %x, %ns, %g, %none, %eps : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.vtensor<[8,16],f32>, !torch.none, !torch.float -> !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,1,1],f32>, !torch.vtensor<[2,1,1],f32>
  return %ln#0 : !torch.vtensor<[2,8,16],f32>
}
// -----
// === contractions
// Attention computed by hand: scores = x @ x^T contracts two sequence-sharded operands over
// different dims.
func.func @attention_by_hand(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,8],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["s"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %xt = torch.aten.transpose.int %x, %int1, %int2 : !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,16,8],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.bmm: a product of two sequence-sharded operands over different dims needs the whole sequence on each rank: attention computed by hand? use scaled_dot_product_attention
  %s = torch.aten.bmm %x, %xt : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,16,8],f32> -> !torch.vtensor<[2,8,8],f32>
  return %s : !torch.vtensor<[2,8,8],f32>
}
// -----
func.func @contraction_no_form(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>, %r: !torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> attributes {sp.args = ["input:input_ids", "param:w", "param:r"], sp.results = ["y"]} {
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.mm: no sharded form for a contraction of layouts rep and seq<0>
  %y = torch.aten.mm %r, %tok : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32> -> !torch.vtensor<[4,16],f32>
  return %y : !torch.vtensor<[4,16],f32>
}
// -----
func.func @addmm_partial(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>, %b: !torch.vtensor<[16],f32>) -> !torch.vtensor<[16,16],f32> attributes {sp.args = ["input:input_ids", "param:w", "param:b"], sp.results = ["g"]} {
  %int1 = torch.constant.int 1
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %tt = torch.aten.t %tok : !torch.vtensor<[16,16],f32> -> !torch.vtensor<[16,16],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.addmm: bias of layout rep cannot be added to a product of layout partial
  %g = torch.aten.addmm %b, %tt, %tok, %int1, %int1 : !torch.vtensor<[16],f32>, !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,16],f32>
  return %g : !torch.vtensor<[16,16],f32>
}
// -----
// === model-specific ops
func.func @embedding_sharded_weight(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["y"]} {
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.embedding: embedding expects replicated weights and sharded indices, got seq<0>, seq<1>
  %y = torch.aten.embedding %tok, %ids, %int-1, %false, %false : !torch.vtensor<[16,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  return %y : !torch.vtensor<[2,8,16],f32>
}
// -----
func.func @loss_replicated_targets(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>, %tgt: !torch.vtensor<[16],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["input:input_ids", "param:w", "buffer:targets"], sp.results = ["loss"]} {
  %int1 = torch.constant.int 1
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.nll_loss_forward: cross entropy expects token-sharded logits and targets, got seq<0>, rep
  %loss, %tw = torch.aten.nll_loss_forward %tok, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  return %loss : !torch.vtensor<[],f32>
}
// -----
func.func @attention_operand_layout(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,4,4],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["o"]} {
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  // A [B, S, H, D] tensor passed where [B, H, S, D] is expected (the transpose was forgotten).
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: sp.attention: attention operand 0 must be sharded along its sequence dim 2, got seq<1>
  %o, %lse = "sp.attention"(%v, %v, %v) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,8,4,4],f32>, !torch.vtensor<[2,8,4,4],f32>, !torch.vtensor<[2,8,4,4],f32>) -> (!torch.vtensor<[2,8,4,4],f32>, !torch.vtensor<[2,8,4],f32>)
  return %o : !torch.vtensor<[2,8,4,4],f32>
}
// -----
// === random ops
func.func @dropout_replicated(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[32,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["d"]} {
  %true = torch.constant.bool true
  %p = torch.constant.float 1.000000e-01
  // CHECK: {{.*}}sp-propagate-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-propagate-sequence: aten.native_dropout: dropout of a value with layout rep: each rank draws its own mask, so only sequence-sharded values (activations) can be dropped out
  %d, %mask = torch.aten.native_dropout %w, %p, %true : !torch.vtensor<[32,16],f32>, !torch.float, !torch.bool -> !torch.vtensor<[32,16],f32>, !torch.vtensor<[32,16],i1>
  return %d : !torch.vtensor<[32,16],f32>
}
