// sp-fuse on the LM head's loss backward: the recomputed log-softmax, the loss gradient's one-hot rows
// (nll_loss_backward) and log-softmax's backward are one kernel over [4, 16]: the log-probabilities and
// the one-hot never touch memory. The kernel reads the logits, the scalar gradient, the targets and the
// token count.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-fuse)' | FileCheck %s

// CHECK-LABEL: func.func @backward(
// CHECK:         %[[ONE:.*]] = torch.aten.ones_like %arg0
// CHECK-NEXT:    %[[G:.*]] = call @backward_k0(%arg1, %[[ONE]], %arg2, %arg3)
// CHECK-NEXT:    %[[W:.*]] = torch.aten.mm %[[G]], %arg4
// CHECK-LABEL: func.func private @backward_k0(
// CHECK-SAME:    sp.kernel = {domain = array<i64: 4, 16>, ops = 3 : i64}
// CHECK:         %[[LP:.*]] = torch.aten._log_softmax %arg0
// CHECK-NEXT:    %[[OH:.*]] = torch.aten.nll_loss_backward %arg1, %[[LP]], %arg2
// CHECK-NEXT:    %[[D:.*]] = torch.aten._log_softmax_backward_data %[[OH]], %[[LP]]
// CHECK-NEXT:    return %[[D]]
func.func @backward(%loss: !torch.vtensor<[],f32>, %logits: !torch.vtensor<[4,16],f32>, %target: !torch.vtensor<[4],si64>, %count: !torch.vtensor<[],f32>, %w: !torch.vtensor<[16,8],f32>) -> !torch.vtensor<[4,8],f32> attributes {sp.args = ["saved:0", "saved:1", "saved:2", "saved:3", "param:w"], sp.results = ["grad:h"]} {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int-100 = torch.constant.int -100
  %one = torch.aten.ones_like %loss, %none, %none, %none, %false, %none : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[4,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,16],f32>
  %oh = torch.aten.nll_loss_backward %one, %lp, %target, %none, %int1, %int-100, %count : !torch.vtensor<[],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[4],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[4,16],f32>
  %d = torch.aten._log_softmax_backward_data %oh, %lp, %int1, %int6 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[4,16],f32>
  %h = torch.aten.mm %d, %w : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[4,8],f32>
  return %h : !torch.vtensor<[4,8],f32>
}

// -----

// With class weights (or a log-softmax over another dim) the one-hot is not a kernel op: it stays an
// ATen call between log-softmax and its backward, each a lone op (min_ops=2), so nothing is fused.
// CHECK-LABEL: func.func @weighted(
// CHECK-NOT:     call
// CHECK:         torch.aten._log_softmax
// CHECK-NEXT:    torch.aten.nll_loss_backward
// CHECK-NEXT:    torch.aten._log_softmax_backward_data
// CHECK-NEXT:    return
func.func @weighted(%one: !torch.vtensor<[],f32>, %logits: !torch.vtensor<[4,16],f32>, %target: !torch.vtensor<[4],si64>, %count: !torch.vtensor<[],f32>, %cw: !torch.vtensor<[16],f32>) -> !torch.vtensor<[4,16],f32> attributes {sp.args = ["saved:0", "saved:1", "saved:2", "saved:3", "param:cw"], sp.results = ["grad:x"]} {
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int-100 = torch.constant.int -100
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[4,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[4,16],f32>
  %oh = torch.aten.nll_loss_backward %one, %lp, %target, %cw, %int1, %int-100, %count : !torch.vtensor<[],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[4],si64>, !torch.vtensor<[16],f32>, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[4,16],f32>
  %d = torch.aten._log_softmax_backward_data %oh, %lp, %int1, %int6 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[4,16],f32>
  return %d : !torch.vtensor<[4,16],f32>
}

// -----

// Rows wider than a kernel's block (ops.MAX_KERNEL_ROW = 65536, a 128K vocabulary) are not fused: no
// kernel could be generated, and the ATen ops run in its place would keep intermediates that the
// memory plan, which counts a kernel's inputs and outputs only, would not see.
// CHECK-LABEL: func.func @wide(
// CHECK-NOT:     call
// CHECK:         torch.aten._log_softmax
// CHECK-NEXT:    torch.aten.nll_loss_backward
// CHECK-NEXT:    torch.aten._log_softmax_backward_data
// CHECK-NEXT:    return
func.func @wide(%one: !torch.vtensor<[],f32>, %logits: !torch.vtensor<[2,131072],f32>, %target: !torch.vtensor<[2],si64>, %count: !torch.vtensor<[],f32>) -> !torch.vtensor<[2,131072],f32> attributes {sp.args = ["saved:0", "saved:1", "saved:2", "saved:3"], sp.results = ["grad:x"]} {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int-100 = torch.constant.int -100
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[2,131072],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2,131072],f32>
  %oh = torch.aten.nll_loss_backward %one, %lp, %target, %none, %int1, %int-100, %count : !torch.vtensor<[],f32>, !torch.vtensor<[2,131072],f32>, !torch.vtensor<[2],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[2,131072],f32>
  %d = torch.aten._log_softmax_backward_data %oh, %lp, %int1, %int6 : !torch.vtensor<[2,131072],f32>, !torch.vtensor<[2,131072],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,131072],f32>
  return %d : !torch.vtensor<[2,131072],f32>
}
