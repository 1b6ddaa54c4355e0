// sp-fuse siblings: a closed region takes in a later region of its domain that reads its results or a
// value it reads, when that region's inputs all exist at its call, at most 4 ops lie between them and
// its results, made that much earlier, do not raise the function's peak (sp-plan-memory's simulation).
// The merged call stays where the first region's was.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-fuse)' | FileCheck %s

// SwiGLU's backward: d(up) = g * s is read by a matmul before d(gate)'s chain (reading g, s and the
// gate) begins: one kernel computes both, called before that matmul. The function peaks earlier,
// at the [2,64] matmul.
// CHECK-LABEL: func.func @backward(
// CHECK-SAME:    %[[W:.*]]: !torch.vtensor<[8,8],f32>, %[[GATE:.*]]: !torch.vtensor<[2,8],f32>, %[[S:.*]]: !torch.vtensor<[2,8],f32>, %[[GH:.*]]: !torch.vtensor<[2,8],f32>
// CHECK:         %[[G:.*]] = torch.aten.mm %[[GH]], %[[W]]
// CHECK-NEXT:    %[[K:.*]]:2 = call @backward_k0(%[[G]], %[[S]], %[[GATE]]) : {{.*}} -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>)
// CHECK-NEXT:    %[[DW:.*]] = torch.aten.mm %[[K]]#0, %[[W]]
// CHECK-NEXT:    return %{{.*}}, %[[DW]], %[[K]]#1
// CHECK-LABEL: func.func private @backward_k0(
// CHECK-SAME:    sp.kernel = {domain = array<i64: 2, 8>, ops = 4 : i64}
// CHECK:         %[[UP:.*]] = torch.aten.mul.Tensor %arg0, %arg1
// CHECK-NEXT:    %[[SG:.*]] = torch.aten.sigmoid %arg2
// CHECK-NEXT:    %[[A:.*]] = torch.aten.mul.Tensor %arg0, %[[SG]]
// CHECK-NEXT:    %[[B:.*]] = torch.aten.mul.Tensor %[[A]], %arg1
// CHECK-NEXT:    return %[[UP]], %[[B]]
func.func @backward(%w: !torch.vtensor<[8,8],f32>, %gate: !torch.vtensor<[2,8],f32>, %s: !torch.vtensor<[2,8],f32>, %gh: !torch.vtensor<[2,8],f32>, %w64: !torch.vtensor<[8,64],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>) attributes {sp.args = ["param:w", "saved:0", "saved:1", "input:gh", "param:w64"], sp.results = ["r", "dw", "b"]} {
  %none = torch.constant.none
  %big = torch.aten.mm %gh, %w64 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,64],f32> -> !torch.vtensor<[2,64],f32>
  %r = torch.aten.sum %big, %none : !torch.vtensor<[2,64],f32>, !torch.none -> !torch.vtensor<[],f32>
  %g = torch.aten.mm %gh, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %up = torch.aten.mul.Tensor %g, %s : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %dw = torch.aten.mm %up, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %sg = torch.aten.sigmoid %gate : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %a = torch.aten.mul.Tensor %g, %sg : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %b = torch.aten.mul.Tensor %a, %s : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  return %r, %dw, %b : !torch.vtensor<[],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>
}

// -----

// Not siblings: the second chain reads the matmul of the first one's result (not there at its call),
// the third lies 5 ops after the first (its results would be made that much earlier), and the
// fourth reads only arguments (no value made here in common).
// CHECK-LABEL: func.func @apart(
// CHECK:         %[[G:.*]] = torch.aten.mm
// CHECK-NEXT:    %[[UP:.*]] = torch.aten.mul.Tensor %[[G]], %arg2
// CHECK-NEXT:    %[[DW:.*]] = torch.aten.mm %[[UP]], %arg0
// CHECK-NEXT:    call @apart_k0(%[[DW]], %[[G]])
// CHECK-COUNT-5: torch.aten.mm
// CHECK-NEXT:    call @apart_k1(%[[G]])
// CHECK-NEXT:    call @apart_k2(%arg1)
func.func @apart(%w: !torch.vtensor<[8,8],f32>, %gate: !torch.vtensor<[2,8],f32>, %s: !torch.vtensor<[2,8],f32>, %gh: !torch.vtensor<[2,8],f32>) -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>) attributes {sp.args = ["param:w", "saved:0", "saved:1", "input:gh"], sp.results = ["m5", "d", "f", "b"]} {
  %g = torch.aten.mm %gh, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %up = torch.aten.mul.Tensor %g, %s : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %dw = torch.aten.mm %up, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %a = torch.aten.sigmoid %dw : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %b = torch.aten.mul.Tensor %a, %g : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %m1 = torch.aten.mm %b, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %m2 = torch.aten.mm %m1, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %m3 = torch.aten.mm %m2, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %m4 = torch.aten.mm %m3, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %m5 = torch.aten.mm %m4, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %c = torch.aten.exp %g : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %d = torch.aten.neg %c : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %e = torch.aten.exp %gate : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %f = torch.aten.neg %e : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  return %m5, %d, %f, %b : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>
}

// -----

// A sibling whose result would be made before the function's peak (the [2,64] matmul) and live
// across it, while g (returned) stays live anyway: the peak (sp-plan-memory's simulation) would grow
// by its 64 bytes, so d(up) stays an ATen call and d(gate)'s chain a kernel of its own, where it was.
// CHECK-LABEL: func.func @peak(
// CHECK:         %[[G:.*]] = torch.aten.mm
// CHECK-NEXT:    %[[UP:.*]] = torch.aten.mul.Tensor %[[G]], %arg2
// CHECK-NEXT:    %[[BIG:.*]] = torch.aten.mm %[[UP]], %arg4
// CHECK-NEXT:    torch.aten.sum %[[BIG]]
// CHECK-NEXT:    call @peak_k0(%arg1, %[[G]], %arg2)
func.func @peak(%w: !torch.vtensor<[8,8],f32>, %gate: !torch.vtensor<[2,8],f32>, %s: !torch.vtensor<[2,8],f32>, %gh: !torch.vtensor<[2,8],f32>, %w64: !torch.vtensor<[8,64],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>) attributes {sp.args = ["param:w", "saved:0", "saved:1", "input:gh", "param:w64"], sp.results = ["r", "b", "g"]} {
  %none = torch.constant.none
  %g = torch.aten.mm %gh, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %up = torch.aten.mul.Tensor %g, %s : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %big = torch.aten.mm %up, %w64 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,64],f32> -> !torch.vtensor<[2,64],f32>
  %r = torch.aten.sum %big, %none : !torch.vtensor<[2,64],f32>, !torch.none -> !torch.vtensor<[],f32>
  %sg = torch.aten.sigmoid %gate : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %a = torch.aten.mul.Tensor %g, %sg : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %b = torch.aten.mul.Tensor %a, %s : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  return %r, %b, %g : !torch.vtensor<[],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>
}

// -----
// RMSNorm's backward where the weight gradient's product comes inside the norm's own chain: the
// product's region is called first (its column sum reads it), and the chain that began before it
// joins it there, its inputs all made by then: one kernel, before the sum. The function peaks
// earlier, at the [2,64] matmul.
// CHECK-LABEL: func.func @norm_backward(
// CHECK:         torch.aten.sum %
// CHECK-NEXT:    torch.aten.mm %arg0, %arg1
// CHECK-NEXT:    %[[K:.*]]:2 = call @norm_backward_k0(
// CHECK-NEXT:    torch.prim.ListConstruct
// CHECK-NEXT:    torch.aten.sum.dim_IntList %[[K]]#0
// CHECK-NOT:     call
// CHECK-LABEL: func.func private @norm_backward_k0(
// CHECK-SAME:    sp.kernel = {domain = array<i64: 2, 8>, ops = 4 : i64}
func.func @norm_backward(%gh: !torch.vtensor<[2,8],f32>, %wm: !torch.vtensor<[8,8],f32>, %xh: !torch.vtensor<[2,8],f32>, %w: !torch.vtensor<[8],f32>, %r: !torch.vtensor<[2,1],f32>, %w64: !torch.vtensor<[8,64],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[1,8],f32>, !torch.vtensor<[2,8],f32>) attributes {sp.args = ["input:gh", "param:wm", "saved:0", "param:w", "saved:1", "param:w64"], sp.results = ["r", "dw", "dx"]} {
  %int0 = torch.constant.int 0
  %true = torch.constant.bool true
  %none = torch.constant.none
  %big = torch.aten.mm %gh, %w64 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,64],f32> -> !torch.vtensor<[2,64],f32>
  %rr = torch.aten.sum %big, %none : !torch.vtensor<[2,64],f32>, !torch.none -> !torch.vtensor<[],f32>
  %g = torch.aten.mm %gh, %wm : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[2,8],f32>
  %a = torch.aten.mul.Tensor %g, %w : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[2,8],f32>
  %p = torch.aten.mul.Tensor %g, %xh : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  %dims = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %s = torch.aten.sum.dim_IntList %p, %dims, %true, %none : !torch.vtensor<[2,8],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,8],f32>
  %b = torch.aten.mul.Tensor %a, %r : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,1],f32> -> !torch.vtensor<[2,8],f32>
  %dx = torch.aten.mul.Tensor %b, %xh : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
  return %rr, %s, %dx : !torch.vtensor<[],f32>, !torch.vtensor<[1,8],f32>, !torch.vtensor<[2,8],f32>
}
