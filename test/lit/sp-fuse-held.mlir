// sp-fuse does not grow a region across host ops when that would raise the function's peak: the
// call sits at the region's last op, so every input read for the last time inside the region would
// stay live until then (sp-plan-memory's simulation of the unfused function; scalars not counted).
// A chunked weight gradient in bf16 (sp-tile-sequence's LM head under precision=bf16): each chunk's
// part is cast to f32 and added to the running sum. Grown whole, the chain was one kernel after the
// last matmul, reading every part (for Llama-8B's head, 32 parts of 1 GiB); each kernel now takes
// one part and the sum so far, so one part at a time is live besides the sum.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse)' | FileCheck %s

// CHECK-LABEL: func.func @backward(
// CHECK:         %[[P0:.*]] = torch.aten.mm %arg0, %arg1
// CHECK-NEXT:    %[[P1:.*]] = torch.aten.mm %arg0, %arg2
// CHECK-NEXT:    %[[S1:.*]] = call @backward_k0(%[[P0]], %[[P1]])
// CHECK-NEXT:    %[[P2:.*]] = torch.aten.mm %arg0, %arg3
// CHECK-NEXT:    %[[S2:.*]] = call @backward_k1(%[[P2]], %[[S1]])
// CHECK-NEXT:    %[[P3:.*]] = torch.aten.mm %arg0, %arg4
// CHECK-NEXT:    %[[S3:.*]] = call @backward_k2(%[[P3]], %[[S2]])
// CHECK-NEXT:    return %[[S3]]
// CHECK-LABEL: func.func private @backward_k1(
// CHECK-SAME:    sp.kernel = {domain = array<i64: 64, 64>, ops = 2 : i64}
// CHECK:         %[[C:.*]] = torch.aten._to_copy %arg0
// CHECK-NEXT:    torch.aten.add.Tensor %arg1, %[[C]]
func.func @backward(%x: !torch.vtensor<[64,16],bf16>, %y0: !torch.vtensor<[16,64],bf16>, %y1: !torch.vtensor<[16,64],bf16>, %y2: !torch.vtensor<[16,64],bf16>, %y3: !torch.vtensor<[16,64],bf16>) -> !torch.vtensor<[64,64],f32> attributes {sp.args = ["param:x", "saved:0", "saved:1", "saved:2", "saved:3"], sp.results = ["dw"]} {
  %int6 = torch.constant.int 6
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %false = torch.constant.bool false
  %p0 = torch.aten.mm %x, %y0 : !torch.vtensor<[64,16],bf16>, !torch.vtensor<[16,64],bf16> -> !torch.vtensor<[64,64],bf16>
  %c0 = torch.aten._to_copy %p0, %int6, %none, %none, %none, %false, %none : !torch.vtensor<[64,64],bf16>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[64,64],f32>
  %p1 = torch.aten.mm %x, %y1 : !torch.vtensor<[64,16],bf16>, !torch.vtensor<[16,64],bf16> -> !torch.vtensor<[64,64],bf16>
  %c1 = torch.aten._to_copy %p1, %int6, %none, %none, %none, %false, %none : !torch.vtensor<[64,64],bf16>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[64,64],f32>
  %s1 = torch.aten.add.Tensor %c0, %c1, %int1 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32>, !torch.int -> !torch.vtensor<[64,64],f32>
  %p2 = torch.aten.mm %x, %y2 : !torch.vtensor<[64,16],bf16>, !torch.vtensor<[16,64],bf16> -> !torch.vtensor<[64,64],bf16>
  %c2 = torch.aten._to_copy %p2, %int6, %none, %none, %none, %false, %none : !torch.vtensor<[64,64],bf16>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[64,64],f32>
  %s2 = torch.aten.add.Tensor %s1, %c2, %int1 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32>, !torch.int -> !torch.vtensor<[64,64],f32>
  %p3 = torch.aten.mm %x, %y3 : !torch.vtensor<[64,16],bf16>, !torch.vtensor<[16,64],bf16> -> !torch.vtensor<[64,64],bf16>
  %c3 = torch.aten._to_copy %p3, %int6, %none, %none, %none, %false, %none : !torch.vtensor<[64,64],bf16>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[64,64],f32>
  %s3 = torch.aten.add.Tensor %s2, %c3, %int1 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32>, !torch.int -> !torch.vtensor<[64,64],f32>
  return %s3 : !torch.vtensor<[64,64],f32>
}
