// --emit=host-program diagnostics: the host program only calls allowlisted ATen overloads and sp
// ops; anything else is reported at its location instead of reaching the runtime.
// RUN: not %autosp-opt %s --split-input-file --emit=host-program 2>&1 | FileCheck %s

// CHECK: {{.*}}host-program-invalid.mlir:[[# @LINE + 1]]:1: error: the function has no 'sp.args' attribute; it is set by the importer
func.func @no_signature(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> {
  return %x : !torch.vtensor<[2,8],f32>
}
// -----
func.func @unsupported_aten(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> attributes {sp.args = ["input:x"], sp.results = ["y"]} {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  // CHECK: {{.*}}host-program-invalid.mlir:[[# @LINE + 1]]:8: error: unsupported op aten.cumsum: autosp's runtime does not execute it
  %0 = torch.aten.cumsum %x, %int1, %none : !torch.vtensor<[2,8],f32>, !torch.int, !torch.none -> !torch.vtensor<[2,8],f32>
  return %0 : !torch.vtensor<[2,8],f32>
}
// -----
// Forgetting sp-raise-attention leaves the captured custom op, which no runtime executes.
func.func @unraised_attention(%q: !torch.vtensor<[1,2,4,8],f32>) -> !torch.vtensor<[1,2,4,8],f32> attributes {sp.args = ["input:q"], sp.results = ["o"]} {
  %true = torch.constant.bool true
  %scale = torch.constant.float 1.250000e-01
  %window1 = torch.constant.int 0
  // CHECK: {{.*}}host-program-invalid.mlir:[[# @LINE + 1]]:12: error: unsupported op autosp.attention: autosp's runtime does not execute it
  %att:2 = torch.operator "torch.autosp.attention"(%q, %q, %q, %true, %scale, %window1) : (!torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4,8],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4],f32>)
  return %att#0 : !torch.vtensor<[1,2,4,8],f32>
}
// -----
// A value the host program has no register for (a tensor list is not an instruction).
// CHECK: {{.*}}host-program-invalid.mlir:[[# @LINE + 1]]:1: error: operand %0 of type !torch.list<vtensor> is computed at run time by an op the host program cannot express
func.func @list_operand(%a: !torch.vtensor<[2,8],f32>, %b: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> attributes {sp.args = ["input:a", "input:b"], sp.results = ["y"]} {
  %l = torch.prim.ListConstruct %a, %b : (!torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>) -> !torch.list<vtensor>
  %x, %y = torch.prim.ListUnpack %l : !torch.list<vtensor> -> !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>
  return %y : !torch.vtensor<[2,8],f32>
}
// -----
// A device constant outside a Device argument would name the capture's device in the artifact.
func.func @device_in_plain_slot(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[8],si64> attributes {sp.args = ["input:x"], sp.results = ["y"]} {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  // CHECK: {{.*}}host-program-invalid.mlir:[[# @LINE + 1]]:8: error: aten.arange operand 0 (end) is the device constant 'cpu': a program must not name a device (factory ops and copies run on the device of the step's inputs)
  %0 = torch.operator "torch.aten.arange"(%cpu, %none, %none, %none, %false) : (!torch.Device, !torch.none, !torch.none, !torch.none, !torch.bool) -> !torch.vtensor<[8],si64>
  return %0 : !torch.vtensor<[8],si64>
}
// -----
// Valid chunks still lower: a replicated step with an sp collective.
// CHECK:      "op": "aten.neg.default"
// CHECK:      "op": "sp.all_reduce"
// CHECK:      "attrs": {
// CHECK-NEXT:   "group": "sp",
// CHECK-NEXT:   "op": "sum"
func.func @valid(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> attributes {sp.args = ["param:x"], sp.results = ["y"]} {
  %0 = torch.aten.neg %x : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %1 = "sp.all_reduce"(%0) {op = "sum", group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32>
  return %1 : !torch.vtensor<[2,8],f32>
}
