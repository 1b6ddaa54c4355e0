// sp-raise-attention diagnostics, at the location of the captured attention op.
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-raise-attention)' 2>&1 | FileCheck %s

func.func @causal_not_constant(%q: !torch.vtensor<[2,4,8,4],f32>, %causal: !torch.bool) -> !torch.vtensor<[2,4,8,4],f32> {
  %scale = torch.constant.float 5.000000e-01
  %window1 = torch.constant.int 0
  // CHECK: {{.*}}sp-raise-attention-invalid.mlir:[[# @LINE + 1]]:12: error: sp-raise-attention: attention causal flag, scale and window must be constants
  %att:2 = torch.operator "torch.autosp.attention"(%q, %q, %q, %causal, %scale, %window1) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  return %att#0 : !torch.vtensor<[2,4,8,4],f32>
}
// -----
func.func @scale_not_constant(%q: !torch.vtensor<[2,4,8,4],f32>, %scale: !torch.float) -> !torch.vtensor<[2,4,8,4],f32> {
  %true = torch.constant.bool true
  %window2 = torch.constant.int 0
  // CHECK: {{.*}}sp-raise-attention-invalid.mlir:[[# @LINE + 1]]:12: error: sp-raise-attention: attention causal flag, scale and window must be constants
  %att:2 = torch.operator "torch.autosp.attention"(%q, %q, %q, %true, %scale, %window2) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  return %att#0 : !torch.vtensor<[2,4,8,4],f32>
}
// -----
func.func @heads_not_multiple(%q: !torch.vtensor<[2,4,8,4],f32>, %k: !torch.vtensor<[2,3,8,4],f32>) -> !torch.vtensor<[2,4,8,4],f32> {
  %true = torch.constant.bool true
  %scale = torch.constant.float 5.000000e-01
  %window3 = torch.constant.int 0
  // CHECK: {{.*}}sp-raise-attention-invalid.mlir:[[# @LINE + 1]]:12: error: sp-raise-attention: 4 query heads are not a multiple of 3 key/value heads
  %att:2 = torch.operator "torch.autosp.attention"(%q, %k, %k, %true, %scale, %window3) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  return %att#0 : !torch.vtensor<[2,4,8,4],f32>
}
// -----
func.func @backward_heads_not_multiple(%q: !torch.vtensor<[2,4,8,4],f32>, %k: !torch.vtensor<[2,3,8,4],f32>, %lse: !torch.vtensor<[2,4,8],f32>) -> !torch.vtensor<[2,4,8,4],f32> {
  %true = torch.constant.bool true
  %scale = torch.constant.float 5.000000e-01
  %window4 = torch.constant.int 0
  // CHECK: {{.*}}sp-raise-attention-invalid.mlir:[[# @LINE + 1]]:10: error: sp-raise-attention: 4 query heads are not a multiple of 3 key/value heads
  %g:3 = torch.operator "torch.autosp.attention_backward"(%q, %q, %k, %k, %q, %lse, %true, %scale, %window4) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>)
  return %g#0 : !torch.vtensor<[2,4,8,4],f32>
}
// -----
// The raised op is verified like any other: a non-positive scale is reported by sp.attention.
func.func @raised_op_verifies(%q: !torch.vtensor<[2,4,8,4],f32>) -> !torch.vtensor<[2,4,8,4],f32> {
  %true = torch.constant.bool true
  %scale = torch.constant.float -1.000000e+00
  %window5 = torch.constant.int 0
  // CHECK: {{.*}}sp-raise-attention-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op scale must be positive, got -1.0
  %att:2 = torch.operator "torch.autosp.attention"(%q, %q, %q, %true, %scale, %window5) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  return %att#0 : !torch.vtensor<[2,4,8,4],f32>
}
