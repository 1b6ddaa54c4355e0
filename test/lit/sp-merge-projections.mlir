// sp-merge-projections: the projections of one input become one matmul by the stacked weights.
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-raise-attention,sp-merge-projections)' | FileCheck %s --check-prefix=LLAMA
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-raise-attention,sp-merge-projections)' | grep -c "torch.aten.mm " | FileCheck %s --check-prefix=MM
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-merge-projections)' | FileCheck %s

// The one-layer Llama step: gate and up (%arg7, %arg8) and q, k, v (%arg2, %arg3, %arg4) are stacked
// once, at the top (the runtime keeps each group side by side: a view, no copy).
// LLAMA: func.func @train_step(
// LLAMA-NEXT: %[[GU:.*]] = torch.prim.ListConstruct %arg7, %arg8 :
// LLAMA: %[[WGU:.*]] = torch.aten.cat %[[GU]], %{{.*}} : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[64,16],f32>
// LLAMA-NEXT: %[[TGU:.*]] = torch.aten.t %[[WGU]] : !torch.vtensor<[64,16],f32> -> !torch.vtensor<[16,64],f32>
// LLAMA-NEXT: %[[QKV:.*]] = torch.prim.ListConstruct %arg2, %arg3, %arg4 :
// LLAMA: %[[WQKV:.*]] = torch.aten.cat %[[QKV]], %{{.*}} -> !torch.vtensor<[32,16],f32>
// LLAMA-NEXT: %[[TQKV:.*]] = torch.aten.t %[[WQKV]] : !torch.vtensor<[32,16],f32> -> !torch.vtensor<[16,32],f32>
// q, k and v keep their forward matmuls: v is read by attention, and a saved slice of one [8, 32]
// result would keep q's and k's columns alive.
// LLAMA-COUNT-3: torch.aten.mm %{{.*}} -> !torch.vtensor<[8,{{16|8}}],f32>
// gate and up, read by SwiGLU's elementwise ops only: one matmul, sliced.
// LLAMA: %[[Y:.*]] = torch.aten.mm %{{.*}}, %[[TGU]] : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,64],f32> -> !torch.vtensor<[8,64],f32>
// LLAMA-NEXT: torch.constant.int 1
// LLAMA-NEXT: torch.constant.int 0
// LLAMA-NEXT: torch.constant.int 32
// LLAMA-NEXT: torch.aten.slice.Tensor %[[Y]], {{.*}} -> !torch.vtensor<[8,32],f32>
// LLAMA-NEXT: torch.constant.int 64
// LLAMA-NEXT: torch.aten.slice.Tensor %[[Y]], {{.*}} -> !torch.vtensor<[8,32],f32>
// Backward, gate / up: the output gradients joined, one matmul for the input gradient, one for the
// stacked weight gradient, sliced into each weight's.
// LLAMA: %[[G:.*]] = torch.aten.cat %{{.*}} -> !torch.vtensor<[8,64],f32>
// LLAMA-NEXT: %[[T1:.*]] = torch.aten.t %[[TGU]] : !torch.vtensor<[16,64],f32> -> !torch.vtensor<[64,16],f32>
// LLAMA-NEXT: torch.aten.mm %[[G]], %[[T1]] : !torch.vtensor<[8,64],f32>, !torch.vtensor<[64,16],f32> -> !torch.vtensor<[8,16],f32>
// LLAMA-NEXT: %[[GT:.*]] = torch.aten.t %[[G]]
// LLAMA-NEXT: %[[DW:.*]] = torch.aten.mm %[[GT]], %{{.*}} : !torch.vtensor<[64,8],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[64,16],f32>
// LLAMA: torch.aten.slice.Tensor %[[DW]], {{.*}} -> !torch.vtensor<[32,16],f32>
// LLAMA: torch.aten.slice.Tensor %[[DW]], {{.*}} -> !torch.vtensor<[32,16],f32>
// q / k / v: their three input gradients were summed; now one matmul of the joined [8, 32].
// LLAMA: %[[G2:.*]] = torch.aten.cat %{{.*}} -> !torch.vtensor<[8,32],f32>
// LLAMA-NEXT: %[[T2:.*]] = torch.aten.t %[[TQKV]]
// LLAMA-NEXT: torch.aten.mm %[[G2]], %[[T2]] : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32,16],f32> -> !torch.vtensor<[8,16],f32>
// LLAMA: %[[DW2:.*]] = torch.aten.mm %{{.*}} -> !torch.vtensor<[32,16],f32>
// LLAMA: torch.aten.slice.Tensor %[[DW2]], {{.*}} -> !torch.vtensor<[16,16],f32>
// LLAMA: torch.aten.slice.Tensor %[[DW2]], {{.*}} -> !torch.vtensor<[8,16],f32>
// LLAMA: torch.aten.slice.Tensor %[[DW2]], {{.*}} -> !torch.vtensor<[8,16],f32>
// The step took 24 matmuls (21 for the seven projections, 3 for the head); now 17.
// MM: 17

// -----
// Two projections of one input read by an elementwise op: merged.
// CHECK-LABEL: func.func @pointwise
// CHECK: %[[W:.*]] = torch.aten.cat %{{.*}} -> !torch.vtensor<[8,2],f32>
// CHECK: %[[T:.*]] = torch.aten.t %[[W]]
// CHECK: %[[Y:.*]] = torch.aten.mm %arg2, %[[T]] : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,8],f32> -> !torch.vtensor<[3,8],f32>
// CHECK-NOT: torch.aten.mm
// CHECK: torch.aten.slice.Tensor %[[Y]]
// CHECK: torch.aten.slice.Tensor %[[Y]]
func.func @pointwise(%w0: !torch.vtensor<[4,2],f32>, %w1: !torch.vtensor<[4,2],f32>, %x: !torch.vtensor<[3,2],f32>) -> !torch.vtensor<[3,4],f32> attributes {sp.args = ["param:a", "param:b", "input:x"]} {
  %0 = torch.aten.t %w0 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %1 = torch.aten.mm %x, %0 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  %2 = torch.aten.t %w1 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %3 = torch.aten.mm %x, %2 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  %4 = torch.aten.mul.Tensor %1, %3 : !torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[3,4],f32>
  return %4 : !torch.vtensor<[3,4],f32>
}

// -----
// An output read by something other than an elementwise op (here returned), and no backward: left as it is.
// CHECK-LABEL: func.func @returned
// CHECK-NOT: torch.aten.cat
// CHECK-COUNT-2: torch.aten.mm
func.func @returned(%w0: !torch.vtensor<[4,2],f32>, %w1: !torch.vtensor<[4,2],f32>, %x: !torch.vtensor<[3,2],f32>) -> (!torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],f32>) attributes {sp.args = ["param:a", "param:b", "input:x"]} {
  %0 = torch.aten.t %w0 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %1 = torch.aten.mm %x, %0 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  %2 = torch.aten.t %w1 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %3 = torch.aten.mm %x, %2 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  return %1, %3 : !torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],f32>
}

// -----
// A weight read by another op too (tied), and projections of different inputs: nothing merges.
// CHECK-LABEL: func.func @tied_and_apart
// CHECK-NOT: torch.aten.cat
// CHECK-COUNT-3: torch.aten.mm
func.func @tied_and_apart(%w0: !torch.vtensor<[4,2],f32>, %w1: !torch.vtensor<[4,2],f32>, %w2: !torch.vtensor<[4,2],f32>, %x: !torch.vtensor<[3,2],f32>, %y: !torch.vtensor<[3,2],f32>) -> (!torch.vtensor<[3,4],f32>, !torch.vtensor<[4,2],f32>) attributes {sp.args = ["param:a", "param:b", "param:c", "input:x", "input:y"]} {
  %0 = torch.aten.t %w0 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %1 = torch.aten.mm %x, %0 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  %2 = torch.aten.t %w1 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %3 = torch.aten.mm %x, %2 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  %4 = torch.aten.t %w2 : !torch.vtensor<[4,2],f32> -> !torch.vtensor<[2,4],f32>
  %5 = torch.aten.mm %y, %4 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[3,4],f32>
  %6 = torch.aten.mul.Tensor %1, %3 : !torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[3,4],f32>
  %7 = torch.aten.mul.Tensor %6, %5 : !torch.vtensor<[3,4],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[3,4],f32>
  %int1 = torch.constant.int 1
  %8 = torch.aten.add.Tensor %w0, %w0, %int1 : !torch.vtensor<[4,2],f32>, !torch.vtensor<[4,2],f32>, !torch.int -> !torch.vtensor<[4,2],f32>
  return %7, %8 : !torch.vtensor<[3,4],f32>, !torch.vtensor<[4,2],f32>
}

// -----
// Autocast: each weight and each projection's input are cast to bf16 on their own. The input casts
// of one value are one key; the stacked weight is cast once, with constants of its own (the
// originals come later).
// CHECK-LABEL: func.func @autocast
// CHECK:       %[[W:.*]] = torch.aten.cat %{{.*}} -> !torch.vtensor<[8,2],f32>
// CHECK:       %[[C:.*]] = torch.aten._to_copy %[[W]], %{{.*}} -> !torch.vtensor<[8,2],bf16>
// CHECK-NEXT:  %[[T:.*]] = torch.aten.t %[[C]] : !torch.vtensor<[8,2],bf16> -> !torch.vtensor<[2,8],bf16>
// CHECK:       torch.aten.mm %{{.*}}, %[[T]] : !torch.vtensor<[3,2],bf16>, !torch.vtensor<[2,8],bf16> -> !torch.vtensor<[3,8],bf16>
// CHECK-NOT:   torch.aten.mm
func.func @autocast(%w0: !torch.vtensor<[4,2],f32>, %w1: !torch.vtensor<[4,2],f32>, %h: !torch.vtensor<[3,2],f32>) -> !torch.vtensor<[3,4],bf16> attributes {sp.args = ["param:a", "param:b", "input:h"]} {
  %int15 = torch.constant.int 15
  %none = torch.constant.none
  %false = torch.constant.bool false
  %c0 = torch.aten._to_copy %w0, %int15, %none, %none, %none, %false, %none : !torch.vtensor<[4,2],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[4,2],bf16>
  %x0 = torch.aten._to_copy %h, %int15, %none, %none, %none, %false, %none : !torch.vtensor<[3,2],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[3,2],bf16>
  %t0 = torch.aten.t %c0 : !torch.vtensor<[4,2],bf16> -> !torch.vtensor<[2,4],bf16>
  %y0 = torch.aten.mm %x0, %t0 : !torch.vtensor<[3,2],bf16>, !torch.vtensor<[2,4],bf16> -> !torch.vtensor<[3,4],bf16>
  %int15_1 = torch.constant.int 15
  %c1 = torch.aten._to_copy %w1, %int15_1, %none, %none, %none, %false, %none : !torch.vtensor<[4,2],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[4,2],bf16>
  %x1 = torch.aten._to_copy %h, %int15_1, %none, %none, %none, %false, %none : !torch.vtensor<[3,2],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[3,2],bf16>
  %t1 = torch.aten.t %c1 : !torch.vtensor<[4,2],bf16> -> !torch.vtensor<[2,4],bf16>
  %y1 = torch.aten.mm %x1, %t1 : !torch.vtensor<[3,2],bf16>, !torch.vtensor<[2,4],bf16> -> !torch.vtensor<[3,4],bf16>
  %r = torch.aten.mul.Tensor %y0, %y1 : !torch.vtensor<[3,4],bf16>, !torch.vtensor<[3,4],bf16> -> !torch.vtensor<[3,4],bf16>
  return %r : !torch.vtensor<[3,4],bf16>
}
