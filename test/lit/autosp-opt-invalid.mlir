// Driver errors: parse and verification errors per chunk (the other chunks still run), unknown
// passes and malformed pass options. Blank lines after a `// -----` must not shift the line
// numbers of later chunks (the chunks below are separated by one, two and three of them).
// RUN: not %autosp-opt %s --split-input-file 2>&1 | FileCheck %s
// RUN: echo 'module {}' | not %autosp-opt --pass-pipeline='builtin.module(canonicalize,sp-no-such-pass)' 2>&1 | FileCheck %s --check-prefix=NOPASS
// RUN: echo 'module {}' | not %autosp-opt --pass-pipeline='builtin.module(sp-partition-sequence{sp})' 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: echo '"foo.bar"() : () -> ()' | %autosp-opt --allow-unregistered-dialect | FileCheck %s --check-prefix=ALLOW

// NOPASS: <stdin>: error: {{.*}}'sp-no-such-pass' does not refer to a registered pass or pass pipeline
// BADOPT: <stdin>: error: sp-partition-sequence: pass option 'sp' is not key=value
// ALLOW:  "foo.bar"() : () -> ()

func.func @syntax(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> {
  // CHECK: {{.*}}autosp-opt-invalid.mlir:[[# @LINE + 1]]:25: error: expected ':'
  %0 = torch.aten.neg %x -> !torch.vtensor<[2,8],f32>
  return %0 : !torch.vtensor<[2,8],f32>
}
// -----

func.func @unregistered() {
  // CHECK: {{.*}}autosp-opt-invalid.mlir:[[# @LINE + 1]]:17: error: operation being parsed with an unregistered dialect
  %0 = "foo.bar"() : () -> i32
  return
}
// -----


func.func @return_type(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32> {
  // CHECK: {{.*}}autosp-opt-invalid.mlir:[[# @LINE + 1]]:3: error: type of return operand 0 ('!torch.vtensor<[2,8],f32>') doesn't match function result type ('!torch.vtensor<[2,4],f32>')
  return %x : !torch.vtensor<[2,8],f32>
}
// -----



// CHECK-LABEL: func.func @fine
func.func @fine(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> {
  return %x : !torch.vtensor<[2,8],f32>
}
