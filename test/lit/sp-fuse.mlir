// sp-fuse: fusible regions of @forward / @backward -> kernel functions, called with func.call.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse)' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse{min_ops=1})' | FileCheck %s --check-prefix=ONE
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse,sp-plan-memory)' | FileCheck %s --check-prefix=MEM
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' | FileCheck %s --check-prefix=UNFUSED

// RMSNorm (pow, mean over the last dim, + eps, rsqrt, x * r, w * n) is one kernel over [2, 8]: its row
// statistics [2, 1] and the weight [8] broadcast into it. The mm stays. exp and mul fuse, but the
// whole-tensor sum reads their result before the add: the add + neg start a second kernel, called
// after the sum. The lone sigmoid stays an ATen call (min_ops=2). Constants are copied in; the host's
// copies that only fused ops read are erased.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    %[[W:.*]]: !torch.vtensor<[8],f32>, %[[W2:.*]]: !torch.vtensor<[8,8],f32>, %[[X:.*]]: !torch.vtensor<[2,8],f32>)
// CHECK-NOT:     torch.constant.float
// CHECK:         %[[Y:.*]] = call @forward_k0(%[[X]], %[[W]]) : (!torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32>) -> !torch.vtensor<[2,8],f32>
// CHECK-NEXT:    %[[M:.*]] = torch.aten.mm %[[Y]], %[[W2]]
// CHECK-NEXT:    %[[A:.*]] = call @forward_k1(%[[M]])
// CHECK-NEXT:    %[[TOT:.*]] = torch.aten.sum %[[A]]
// CHECK-NEXT:    %[[D:.*]] = call @forward_k2(%[[A]], %[[TOT]])
// CHECK-NEXT:    %[[LOSS:.*]] = torch.aten.sum %[[D]]
// CHECK-NEXT:    %[[S:.*]] = torch.aten.sigmoid %[[Y]]
// CHECK-NEXT:    return %[[LOSS]], %[[S]]
// CHECK-LABEL: func.func @backward(
// CHECK:         %[[H:.*]] = call @backward_k0(
// CHECK-NEXT:    torch.aten.sum.dim_IntList %[[H]]
// CHECK-NEXT:    torch.aten.mm %[[H]]
// CHECK-LABEL: func.func private @forward_k0(
// CHECK-SAME:    %[[KX:.*]]: !torch.vtensor<[2,8],f32>, %[[KW:.*]]: !torch.vtensor<[8],f32>) -> !torch.vtensor<[2,8],f32> attributes {sp.kernel = {domain = array<i64: 2, 8>, ops = 6 : i64}}
// CHECK:         %[[SQ:.*]] = torch.aten.pow.Tensor_Scalar %[[KX]]
// CHECK-NEXT:    %[[MS:.*]] = torch.aten.mean.dim %[[SQ]]{{.*}} -> !torch.vtensor<[2,1],f32>
// CHECK-NEXT:    %[[E:.*]] = torch.aten.add.Scalar %[[MS]]
// CHECK-NEXT:    %[[R:.*]] = torch.aten.rsqrt %[[E]]
// CHECK-NEXT:    %[[N:.*]] = torch.aten.mul.Tensor %[[KX]], %[[R]]
// CHECK-NEXT:    %[[KY:.*]] = torch.aten.mul.Tensor %[[KW]], %[[N]]
// CHECK-NEXT:    return %[[KY]]
// CHECK-LABEL: func.func private @forward_k1(
// CHECK-SAME:    sp.kernel = {domain = array<i64: 2, 8>, ops = 2 : i64}
// CHECK:         torch.aten.exp
// CHECK-NEXT:    torch.aten.mul.Tensor
// CHECK-LABEL: func.func private @forward_k2(
// CHECK:         torch.aten.add.Tensor
// CHECK-NEXT:    torch.aten.neg
// CHECK-LABEL: func.func private @backward_k0(
// CHECK:         torch.aten.sigmoid_backward
// CHECK-NEXT:    torch.aten.mul.Tensor

// min_ops=1: the lone sigmoid is a kernel too.
// ONE: call @forward_k3(
// ONE: func.func private @forward_k3({{.*}}sp.kernel = {domain = array<i64: 2, 8>, ops = 1 : i64}
// ONE-NEXT: torch.aten.sigmoid

// The memory plan sees each kernel's inputs and outputs, never its intermediates: one timeline entry
// per host instruction, and a forward peak of 132 B where the unfused program peaks at 256 B (the
// exp chain's kernels write into the operand that dies at them: sp-plan-memory's sp.in_place).
// MEM:      forward_peak_bytes = 132 : i64
// MEM:      func.func @forward({{.*}}sp.live_timeline = array<i64: 64, 128, 128, 132, 128, 68, 68>
// UNFUSED:  forward_peak_bytes = 256 : i64
func.func @forward(%w: !torch.vtensor<[8],f32>, %w2: !torch.vtensor<[8,8],f32>, %x: !torch.vtensor<[2,8],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,8],f32>) attributes {sp.args = ["param:w", "param:w2", "input:x"], sp.results = ["loss", "saved:0"]} {
  %none = torch.constant.none
  %true = torch.constant.bool true
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int-1 = torch.constant.int -1
  %eps = torch.constant.float 1.000000e-06
  %dims = torch.prim.ListConstruct %int-1 : (!torch.int) -> !torch.list<int>
  %sq = torch.aten.pow.Tensor_Scalar %x, %int2 : !torch.vtensor<[2,8],f32>, !torch.int -> !torch.vtensor<[2,8],f32>
  %ms = torch.aten.mean.dim %sq, %dims, %true, %none : !torch.vtensor<[2,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,1],f32>
  %e = torch.aten.add.Scalar %ms, %eps, %int1 : !torch.vtensor<[2,1],f32>, !torch.float, !torch.int -> !torch.vtensor<[2,1],f32>
  %r = torch.aten.rsqrt %e : !torch.vtensor<[2,1],f32> -> !torch.vtensor<[2,1],f32>
  %n = torch.aten.mul.Tensor %x, %r : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,1],f32> -> !torch.vtensor<[2,8],f32>
  %y = torch.aten.mul.Tensor %w, %n : !torch.vtensor<[8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %m = torch.aten.mm %y, %w2 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %a = torch.aten.exp %m : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %a2 = torch.aten.mul.Tensor %a, %m : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %tot = torch.aten.sum %a2, %none : !torch.vtensor<[2,8],f32>, !torch.none -> !torch.vtensor<[],f32>
  %c = torch.aten.add.Tensor %a2, %tot, %int1 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[],f32>, !torch.int -> !torch.vtensor<[2,8],f32>
  %d = torch.aten.neg %c : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %loss = torch.aten.sum %d, %none : !torch.vtensor<[2,8],f32>, !torch.none -> !torch.vtensor<[],f32>
  %lone = torch.aten.sigmoid %y : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  return %loss, %lone : !torch.vtensor<[],f32>, !torch.vtensor<[2,8],f32>
}
func.func @backward(%w: !torch.vtensor<[8],f32>, %w2: !torch.vtensor<[8,8],f32>, %x: !torch.vtensor<[2,8],f32>, %s: !torch.vtensor<[2,8],f32>) -> (!torch.vtensor<[8],f32>, !torch.vtensor<[8,8],f32>) attributes {sp.args = ["param:w", "param:w2", "input:x", "saved:0"], sp.results = ["grad:w", "grad:w2"]} {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int0 = torch.constant.int 0
  %dims = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %g = torch.aten.sigmoid_backward %s, %x : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %h = torch.aten.mul.Tensor %g, %s : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %gw = torch.aten.sum.dim_IntList %h, %dims, %false, %none : !torch.vtensor<[2,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[8],f32>
  %gw2 = torch.aten.mm %h, %w2 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %v = torch.aten.view %gw2, %dims : !torch.vtensor<[2,8],f32>, !torch.list<int> -> !torch.vtensor<[8,8],f32>
  return %gw, %v : !torch.vtensor<[8],f32>, !torch.vtensor<[8,8],f32>
}
