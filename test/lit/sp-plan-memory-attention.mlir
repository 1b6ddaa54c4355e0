// sp-plan-memory counts what an attention kernel holds beside its operands and results, as CUDA's
// kernels do (runtime/kernels.py). Here bf16 causal attention with grouped K/V (4 query heads, 2 KV
// heads, 256 rows, head dim 64): FlashAttention-2, whose forward holds nothing more and whose
// backward holds an fp32 dq accumulator and row sums, 4 * 4 * 256 * (64 + 1) = 266240 B, and dk / dv
// at the query heads before their sum, 2 * 4 * 256 * 64 * 2 = 262144 B.
// The backward's peak is at the kernel: saved out + lse (131072 + 4096), dout (131072), dq + dk + dv
// (131072 + 2 * 65536), then the workspace: 528384 + 528384 = 1056768 B.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' | FileCheck %s
// CHECK:       func.func @forward({{.*}}sp.live_peak_bytes = 135170 : i64
// CHECK:       func.func @backward({{.*}}sp.live_peak_bytes = 1056768 : i64
func.func @forward(%q: !torch.vtensor<[1,4,256,64],bf16>, %k: !torch.vtensor<[1,2,256,64],bf16>, %v: !torch.vtensor<[1,2,256,64],bf16>) -> (!torch.vtensor<[],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>) attributes {sp.args = ["param:q", "param:k", "param:v"], sp.results = ["loss", "saved:0", "saved:1"]} {
  %none = torch.constant.none
  %o:2 = "sp.attention"(%q, %k, %v) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64} : (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>)
  %loss = torch.aten.sum %o#0, %none : !torch.vtensor<[1,4,256,64],bf16>, !torch.none -> !torch.vtensor<[],bf16>
  return %loss, %o#0, %o#1 : !torch.vtensor<[],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>
}
func.func @backward(%q: !torch.vtensor<[1,4,256,64],bf16>, %k: !torch.vtensor<[1,2,256,64],bf16>, %v: !torch.vtensor<[1,2,256,64],bf16>, %out: !torch.vtensor<[1,4,256,64],bf16>, %lse: !torch.vtensor<[1,4,256],f32>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>) attributes {sp.args = ["param:q", "param:k", "param:v", "saved:0", "saved:1"], sp.results = ["grad:q", "grad:k", "grad:v"]} {
  %none = torch.constant.none
  %dout = torch.aten.ones_like %out, %none, %none, %none, %none, %none : !torch.vtensor<[1,4,256,64],bf16>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[1,4,256,64],bf16>
  %g:3 = "sp.attention_grad"(%dout, %q, %k, %v, %out, %lse) {causal = true, kv_groups = 2 : i64, scale = 0.125 : f64, window = 0 : i64} : (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,4,256],f32>) -> (!torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>)
  return %g#0, %g#1, %g#2 : !torch.vtensor<[1,4,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>, !torch.vtensor<[1,2,256,64],bf16>
}
