// Wrong operand / result counts must be diagnosed by IRDL, not crash the verifiers.
// XFAIL: *
// Known bug: the Python verifiers in dialects/sp.py index operands/results before IRDL has
// checked their number (`self.operation.operands[2]`, `op.operation.results[0]`), so autosp-opt
// dies with `IndexError: index out of range` and a traceback instead of printing a diagnostic.
// Remove the XFAIL line once the verifiers check the counts first.
// RUN: not %autosp-opt %s --split-input-file 2>&1 | FileCheck %s
// CHECK-NOT: Traceback
// CHECK-NOT: IndexError

func.func @attention_two_operands(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid-arity.mlir:[[# @LINE + 1]]:12: error: op expects exactly 3 operands, but got 2
  %o, %l = "sp.attention"(%q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}
// -----
func.func @attention_grad_three_operands(%q: !torch.vtensor<[2,4,8,16],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid-arity.mlir:[[# @LINE + 1]]:10: error: op expects exactly 6 operands, but got 3
  %a:3 = "sp.attention_grad"(%q, %q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>)
  return
}
// -----
func.func @all_reduce_no_operand() -> !torch.vtensor<[2,8],f32> {
  // CHECK: {{.*}}sp-dialect-invalid-arity.mlir:[[# @LINE + 1]]:8: error: op expects exactly 1 operands, but got 0
  %0 = "sp.all_reduce"() {op = "sum", group = "sp"} : () -> !torch.vtensor<[2,8],f32>
  return %0 : !torch.vtensor<[2,8],f32>
}
// -----
func.func @halo_no_result(%x: !torch.vtensor<[2,8],si64>) {
  // CHECK: {{.*}}sp-dialect-invalid-arity.mlir:[[# @LINE + 1]]:3: error: op expects exactly 1 results, but got 0
  "sp.halo"(%x) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> ()
  return
}
