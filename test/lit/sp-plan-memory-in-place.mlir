// sp-plan-memory: an sp.all_reduce or a kernel call whose operand's storage dies at it, held by no
// other value, writes a result of the same shape and dtype into it: no new buffer in the plan, and
// the op is marked sp.in_place (per result, the operand, or -1), which the host program carries to
// the runtime. Not when the operand lives on (read later, or through a view read later), is
// returned, is the caller's (an argument), or differs from the result.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' --emit=host-program | FileCheck %s --check-prefix=HOST

// %g (256 B) is reduced into; %h and its view %v (256 B) live on after their reduction, which makes
// its own 256 B; so does the argument's. Live after each op: 256 (%g), 256 (reduced into), 512 (%h),
// 512 (%v), 768, 768 (%v's negation made, %h's storage freed: 1024 at the op), 1024.
// CHECK-LABEL: func.func @backward(
// CHECK-SAME:    sp.live_peak_bytes = 1024 : i64, sp.live_timeline = array<i64: 256, 256, 512, 512, 768, 768, 1024>
// CHECK:         %[[G:.*]] = torch.aten.mul.Tensor %arg0, %arg0
// CHECK-NEXT:    "sp.all_reduce"(%[[G]]) {group = "sp", op = "sum", sp.in_place = array<i64: 0>}
// CHECK:         %[[H:.*]] = torch.aten.mul.Tensor %arg0, %arg0
// CHECK:         "sp.all_reduce"(%[[H]]) {group = "sp", op = "sum"}
// CHECK:         "sp.all_reduce"(%arg0) {group = "sp", op = "sum"}
// HOST:       "backward": {
// HOST:         "op": "sp.all_reduce",
// HOST-NEXT:    "args": [
// HOST:         "attrs": {
// HOST-NEXT:      "group": "sp",
// HOST-NEXT:      "op": "sum",
// HOST-NEXT:      "in_place": [
// HOST-NEXT:        0
// HOST-NEXT:      ]
// HOST-NEXT:    },
// HOST:         "op": "sp.all_reduce",
// HOST-NEXT:    "args": [
// HOST:         "attrs": {
// HOST-NEXT:      "group": "sp",
// HOST-NEXT:      "op": "sum"
// HOST-NEXT:    },
func.func @forward(%w: !torch.vtensor<[8,8],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:w"], sp.results = ["loss"]} {
  %none = torch.constant.none
  %loss = torch.aten.sum %w, %none : !torch.vtensor<[8,8],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %loss : !torch.vtensor<[],f32>
}
func.func @backward(%w: !torch.vtensor<[8,8],f32>) -> (!torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>, !torch.vtensor<[64],f32>, !torch.vtensor<[8,8],f32>) attributes {sp.args = ["param:w"], sp.results = ["grad:a", "grad:b", "grad:c", "grad:d"]} {
  %int64 = torch.constant.int 64
  %shape = torch.prim.ListConstruct %int64 : (!torch.int) -> !torch.list<int>
  %g = torch.aten.mul.Tensor %w, %w : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[8,8],f32>
  %rg = "sp.all_reduce"(%g) {group = "sp", op = "sum"} : (!torch.vtensor<[8,8],f32>) -> !torch.vtensor<[8,8],f32>
  %h = torch.aten.mul.Tensor %w, %w : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[8,8],f32>
  %v = torch.aten.view %h, %shape : !torch.vtensor<[8,8],f32>, !torch.list<int> -> !torch.vtensor<[64],f32>
  %rh = "sp.all_reduce"(%h) {group = "sp", op = "sum"} : (!torch.vtensor<[8,8],f32>) -> !torch.vtensor<[8,8],f32>
  %n = torch.aten.neg %v : !torch.vtensor<[64],f32> -> !torch.vtensor<[64],f32>
  %rw = "sp.all_reduce"(%w) {group = "sp", op = "sum"} : (!torch.vtensor<[8,8],f32>) -> !torch.vtensor<[8,8],f32>
  return %rg, %rh, %n, %rw : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>, !torch.vtensor<[64],f32>, !torch.vtensor<[8,8],f32>
}
