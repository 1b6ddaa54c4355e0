// sp-plan-memory: lifetimes of @forward then @backward and the predicted per-rank peak.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' | FileCheck %s
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory{budget=512})' 2>&1 | FileCheck %s --check-prefix=BUDGET

// Parameters 256 B (w: 8x8 f32), input 128 B. The forward makes %a (256 B) and its view %v (no
// bytes: %a's storage), then %b (256 B): 512 B. The loss (4 B) is made before %b dies: the peak,
// 516 B. %a's storage outlives %a through %v, which is returned (saved); the unread %unused dies at
// once. The backward starts with the saved 256 B and only views it. Predicted: 256 + 128 + 516,
// of which saved (made by the forward's peak) 256 B and transient 260 B.
// CHECK-LABEL: module attributes {sp.memory = {
// CHECK-SAME:    backward_peak_bytes = 256 : i64, comm = 0 : i64, forward_peak_bytes = 516 : i64, gradient_bytes = 256 : i64, gradients = 0 : i64, inputs = 128 : i64, parameters = 256 : i64, predicted_peak_bytes = 900 : i64, saved = 256 : i64, saved_bytes = 256 : i64, transient = 260 : i64}}
// CHECK:       func.func @forward({{.*}} attributes {{{.*}}sp.live_peak_bytes = 516 : i64, sp.live_timeline = array<i64: 256, 256, 512, 260, 260>
// CHECK:       func.func @backward({{.*}} attributes {{{.*}}sp.live_peak_bytes = 256 : i64, sp.live_timeline = array<i64: 256>
// BUDGET: error: sp-plan-memory: predicted peak 900 B per rank exceeds the budget 512 B (parameters 256 B, gradients 0 B, inputs 128 B, saved 256 B, transient 260 B, comm 0 B)
func.func @forward(%w: !torch.vtensor<[8,8],f32>, %x: !torch.vtensor<[4,8],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[64],f32>) attributes {sp.args = ["param:w", "input:x"], sp.results = ["loss", "saved:0"]} {
  %none = torch.constant.none
  %int64 = torch.constant.int 64
  %shape = torch.prim.ListConstruct %int64 : (!torch.int) -> !torch.list<int>
  %a = torch.aten.mul.Tensor %w, %w : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[8,8],f32>
  %v = torch.aten.view %a, %shape : !torch.vtensor<[8,8],f32>, !torch.list<int> -> !torch.vtensor<[64],f32>
  %b = torch.aten.mm %a, %w : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[8,8],f32>
  %loss = torch.aten.sum %b, %none : !torch.vtensor<[8,8],f32>, !torch.none -> !torch.vtensor<[],f32>
  %unused = torch.aten.neg %loss : !torch.vtensor<[],f32> -> !torch.vtensor<[],f32>
  return %loss, %v : !torch.vtensor<[],f32>, !torch.vtensor<[64],f32>
}
func.func @backward(%w: !torch.vtensor<[8,8],f32>, %x: !torch.vtensor<[4,8],f32>, %s: !torch.vtensor<[64],f32>) -> !torch.vtensor<[8,8],f32> attributes {sp.args = ["param:w", "input:x", "saved:0"], sp.results = ["grad:w"]} {
  %int8 = torch.constant.int 8
  %shape = torch.prim.ListConstruct %int8, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
  %g = torch.aten.view %s, %shape : !torch.vtensor<[64],f32>, !torch.list<int> -> !torch.vtensor<[8,8],f32>
  return %g : !torch.vtensor<[8,8],f32>
}

