// Packed documents (the attention's fourth operand, each query's position in its document) over the
// whole sequence: in bf16 CUDA runs FlashAttention-2 over them as its variable-length batch, which
// holds what it holds without documents (sp-plan-memory-attention.mlir) and no mask.
// In fp32 the efficient kernel runs them with a dense additive mask [1, 256, 256 to 16] fp32 (262144 B)
// and the bool matrices that build it ([1, 256, 256] and [256, 256]: 131072 B), beside K/V repeated to
// the query heads (2 x 262144 B) and the results out + lse (262144 + 4096): 1183744 B.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-plan-memory)' | FileCheck %s
// CHECK:       func.func @forward({{.*}}sp.live_peak_bytes = 135170 : i64
// CHECK:       func.func @backward({{.*}}sp.live_peak_bytes = 1056768 : i64
// CHECK:       func.func @forward({{.*}}sp.live_peak_bytes = 1183744 : i64
// CHECK:       func.func @backward({{.*}}sp.live_peak_bytes = 2764800 : i64
func.func @forward(%q: !torch.vtensor<[1,4,256,64],bf16>, %k: !torch.vtensor<[1,2,256,64],bf16>, %v: !torch.vtensor<[1,2,256,64],bf16>, %docs: !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["param:q", "param:k", "param:v", "input:doc_pos"], sp.results = ["loss", "saved:0", "saved:1"]} {
  %none = torch.constant.none
  %o:2 = "sp.attention"(%q, %k, %v, %docs) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64} : (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>)
  %loss = torch.aten.sum %o#0, %none : !torch.vtensor<[1,4,256,64],bf16>, !torch.none -> !torch.vtensor<[],bf16>
  return %loss, %o#0, %o#1 : !torch.vtensor<[],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>
}
func.func @backward(%q: !torch.vtensor<[1,4,256,64],bf16>, %k: !torch.vtensor<[1,2,256,64],bf16>, %v: !torch.vtensor<[1,2,256,64],bf16>, %out: !torch.vtensor<[1,4,256,64],bf16>, %lse: !torch.vtensor<[1,4,256],f32>, %docs: !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>) attributes {sp.args = ["param:q", "param:k", "param:v", "saved:0", "saved:1", "input:doc_pos"], sp.results = ["grad:q", "grad:k", "grad:v"]} {
  %none = torch.constant.none
  %dout = torch.aten.ones_like %out, %none, %none, %none, %none, %none : !torch.vtensor<[1,4,256,64],bf16>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[1,4,256,64],bf16>
  %g:3 = "sp.attention_grad"(%dout, %q, %k, %v, %out, %lse, %docs) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64} : (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>, !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>)
  return %g#0, %g#1, %g#2 : !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>
}
// -----
func.func @forward(%q: !torch.vtensor<[1,4,256,64],f32>, %k: !torch.vtensor<[1,2,256,64],f32>, %v: !torch.vtensor<[1,2,256,64],f32>, %docs: !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["param:q", "param:k", "param:v", "input:doc_pos"], sp.results = ["loss", "saved:0", "saved:1"]} {
  %none = torch.constant.none
  %o:2 = "sp.attention"(%q, %k, %v, %docs) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64} : (!torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,4,256],f32>)
  %loss = torch.aten.sum %o#0, %none : !torch.vtensor<[1,4,256,64],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %loss, %o#0, %o#1 : !torch.vtensor<[],f32>, !torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,4,256],f32>
}
func.func @backward(%q: !torch.vtensor<[1,4,256,64],f32>, %k: !torch.vtensor<[1,2,256,64],f32>, %v: !torch.vtensor<[1,2,256,64],f32>, %out: !torch.vtensor<[1,4,256,64],f32>, %lse: !torch.vtensor<[1,4,256],f32>, %docs: !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>) attributes {sp.args = ["param:q", "param:k", "param:v", "saved:0", "saved:1", "input:doc_pos"], sp.results = ["grad:q", "grad:k", "grad:v"]} {
  %none = torch.constant.none
  %dout = torch.aten.ones_like %out, %none, %none, %none, %none, %none : !torch.vtensor<[1,4,256,64],f32>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[1,4,256,64],f32>
  %g:3 = "sp.attention_grad"(%dout, %q, %k, %v, %out, %lse, %docs) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64} : (!torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,4,256],f32>, !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>)
  return %g#0, %g#1, %g#2 : !torch.vtensor<[1,4,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>, !torch.vtensor<[1,2,256,64],f32>
}
// -----
func.func @forward(%q: !torch.vtensor<[1,4,256,64],bf16>, %k: !torch.vtensor<[1,2,256,64],bf16>, %v: !torch.vtensor<[1,2,256,64],bf16>, %docs: !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["param:q", "param:k", "param:v", "input:doc_pos"], sp.results = ["saved:0", "saved:1"]} {
  %o:2 = "sp.ring_attention"(%q, %k, %v, %docs) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64, group = "sp"} : (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>)
  return %o#0, %o#1 : !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>
}
func.func @backward(%out: !torch.vtensor<[1,4,256,64],bf16>, %lse: !torch.vtensor<[1,4,256],f32>) -> (!torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["saved:0", "saved:1"], sp.results = ["grad:lse"]} {
  return %lse : !torch.vtensor<[1,4,256],f32>
}
// -----
func.func @forward(%q: !torch.vtensor<[1,4,256,64],bf16>, %k: !torch.vtensor<[1,2,256,64],bf16>, %v: !torch.vtensor<[1,2,256,64],bf16>, %docs: !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["param:q", "param:k", "param:v", "input:doc_pos"], sp.results = ["saved:0", "saved:1"]} {
  %o:2 = "sp.ring_attention"(%q, %k, %v, %docs) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 64 : i64, group = "sp"} : (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,256],si64>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>)
  return %o#0, %o#1 : !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>
}
func.func @backward(%out: !torch.vtensor<[1,4,256,64],bf16>, %lse: !torch.vtensor<[1,4,256],f32>) -> (!torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["saved:0", "saved:1"], sp.results = ["grad:lse"]} {
  return %lse : !torch.vtensor<[1,4,256],f32>
}
