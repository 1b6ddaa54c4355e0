// sp-raise-attention: the captured `torch.autosp.attention[_backward]` custom ops become
// sp.attention / sp.attention_grad; causal, scale and the sliding window become attributes, GQA
// becomes kv_groups.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-raise-attention)' | FileCheck %s

// Grouped-query attention: 4 query heads over 2 key/value heads -> kv_groups = 2, in a sliding
// window of 3 positions. Both results are rewired to the new op.
// CHECK-LABEL: func.func @forward_gqa
// CHECK-SAME:    (%[[Q:[^:]+]]: !torch.vtensor<[2,4,8,4],f32>, %[[K:[^:]+]]: !torch.vtensor<[2,2,8,4],f32>, %[[V:[^:]+]]: !torch.vtensor<[2,2,8,4],f32>)
// CHECK-NOT:     torch.operator
// CHECK:         %[[A:[0-9]+]]:2 = "sp.attention"(%[[Q]], %[[K]], %[[V]]) {causal = true, kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 3 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
// CHECK-NOT:     torch.operator
// CHECK:         return %[[A]]#0, %[[A]]#1
func.func @forward_gqa(%q: !torch.vtensor<[2,4,8,4],f32>, %k: !torch.vtensor<[2,2,8,4],f32>, %v: !torch.vtensor<[2,2,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>) {
  %true = torch.constant.bool true
  %scale = torch.constant.float 5.000000e-01
  %window1 = torch.constant.int 3
  %att:2 = torch.operator "torch.autosp.attention"(%q, %k, %v, %true, %scale, %window1) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  return %att#0, %att#1 : !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>
}
// -----
// Multi-head, non-causal: the i1 false flag is kept (not dropped as a falsy attribute), kv_groups = 1.
// CHECK-LABEL: func.func @forward_mha_noncausal
// CHECK:         "sp.attention"(%{{.+}}, %{{.+}}, %{{.+}}) {causal = false, kv_groups = 1 : i64, scale = 1.250000e-01 : f64, window = 0 : i64}
// CHECK-NOT:     torch.operator
func.func @forward_mha_noncausal(%q: !torch.vtensor<[1,2,4,8],f32>) -> !torch.vtensor<[1,2,4,8],f32> {
  %false = torch.constant.bool false
  %scale = torch.constant.float 1.250000e-01
  %window2 = torch.constant.int 0
  %att:2 = torch.operator "torch.autosp.attention"(%q, %q, %q, %false, %scale, %window2) : (!torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4,8],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4],f32>)
  return %att#0 : !torch.vtensor<[1,2,4,8],f32>
}
// -----
// Forward and backward in one step, as the joint capture produces them: the backward takes
// (dout, q, k, v, out, lse, causal, scale) and returns (dq, dk, dv); its `out`/`lse` operands
// now come from sp.attention.
// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME:    (%[[Q:[^:]+]]: !torch.vtensor<[2,4,8,4],f32>, %[[K:[^:]+]]: !torch.vtensor<[2,1,8,4],f32>, %[[V:[^:]+]]: !torch.vtensor<[2,1,8,4],f32>, %[[DO:[^:]+]]: !torch.vtensor<[2,4,8,4],f32>)
// CHECK:         %[[A:[0-9]+]]:2 = "sp.attention"(%[[Q]], %[[K]], %[[V]]) {causal = true, kv_groups = 4 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// CHECK:         %[[G:[0-9]+]]:3 = "sp.attention_grad"(%[[DO]], %[[Q]], %[[K]], %[[V]], %[[A]]#0, %[[A]]#1) {causal = true, kv_groups = 4 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// CHECK-SAME:      : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>)
// CHECK-NOT:     torch.operator
// CHECK:         return %[[A]]#0, %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @forward_backward(%q: !torch.vtensor<[2,4,8,4],f32>, %k: !torch.vtensor<[2,1,8,4],f32>, %v: !torch.vtensor<[2,1,8,4],f32>, %dout: !torch.vtensor<[2,4,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>) {
  %true = torch.constant.bool true
  %scale = torch.constant.float 5.000000e-01
  %window3 = torch.constant.int 0
  %att:2 = torch.operator "torch.autosp.attention"(%q, %k, %v, %true, %scale, %window3) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %true_0 = torch.constant.bool true
  %scale_0 = torch.constant.float 5.000000e-01
  %window4 = torch.constant.int 0
  %grad:3 = torch.operator "torch.autosp.attention_backward"(%dout, %q, %k, %v, %att#0, %att#1, %true_0, %scale_0, %window4) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>)
  return %att#0, %grad#0, %grad#1, %grad#2 : !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>
}
// -----
// Packed documents: the document positions, the custom ops' last operand, become the sp ops' last
// operand (absent, as above, where the captured op has none).
// CHECK-LABEL: func.func @documents
// CHECK-SAME:    %[[D:[^:]+]]: !torch.vtensor<[2,8],si64>
// CHECK:         %[[A:[0-9]+]]:2 = "sp.attention"(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %[[D]]) {causal = true, kv_groups = 4 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// CHECK:         "sp.attention_grad"(%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}, %[[A]]#0, %[[A]]#1, %[[D]])
// CHECK-NOT:     torch.operator
func.func @documents(%q: !torch.vtensor<[2,4,8,4],f32>, %k: !torch.vtensor<[2,1,8,4],f32>, %v: !torch.vtensor<[2,1,8,4],f32>, %dout: !torch.vtensor<[2,4,8,4],f32>, %doc: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>) {
  %true = torch.constant.bool true
  %scale = torch.constant.float 5.000000e-01
  %window = torch.constant.int 0
  %att:2 = torch.operator "torch.autosp.attention"(%q, %k, %v, %true, %scale, %window, %doc) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.bool, !torch.float, !torch.int, !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %grad:3 = torch.operator "torch.autosp.attention_backward"(%dout, %q, %k, %v, %att#0, %att#1, %true, %scale, %window, %doc) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>, !torch.bool, !torch.float, !torch.int, !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>)
  return %att#0, %grad#0 : !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>
}
// -----
// Everything else is left alone: other ops, and other torch.operator custom ops.
// CHECK-LABEL: func.func @untouched
// CHECK:         torch.aten.neg
// CHECK:         torch.operator "torch.mylib.other"
// CHECK-NOT:     sp.
func.func @untouched(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> {
  %0 = torch.aten.neg %x : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %1 = torch.operator "torch.mylib.other"(%0) : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32>
  return %1 : !torch.vtensor<[2,8],f32>
}
