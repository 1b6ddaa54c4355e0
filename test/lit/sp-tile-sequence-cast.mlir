// sp-tile-sequence under mixed precision: a bf16 head matmul whose logits are cast to f32 for the
// log-softmax and loss, and whose f32 logits gradient is cast back to bf16 for its matmuls (as
// autocast captures an HF model's `logits.float()`), is tiled with both casts inside each chunk.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-tile-sequence{chunks=2})' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-tile-sequence{chunks=2})' --emit=host-program | FileCheck %s --check-prefix=HOST

// CHECK:       module attributes {sp.tiles = [{chunks = 2 : i64, kind = "lm_head", module = "lm_head", tokens = 8 : i64, width = 16 : i64}]}
// CHECK-NOT:     vtensor<[8,16]
// forward chunk: bf16 logits, cast to f32, log-softmax in f32
// CHECK:         %[[L:[0-9]+]] = torch.aten.mm {{.*}} -> !torch.vtensor<[4,16],bf16>
// CHECK-NEXT:    %[[F:[0-9]+]] = torch.aten._to_copy %[[L]], %int6, {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK-NEXT:    torch.aten._log_softmax %[[F]], {{.*}} -> !torch.vtensor<[4,16],f32>
// backward chunk: the f32 gradient cast to bf16 before both matmuls read it
// CHECK:         %[[DX:[0-9]+]] = torch.aten._log_softmax_backward_data {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK-NEXT:    %[[DB:[0-9]+]] = torch.aten._to_copy %[[DX]], %int15, {{.*}} -> !torch.vtensor<[4,16],bf16>
// CHECK-NEXT:    torch.aten.mm %[[DB]], {{.*}} -> !torch.vtensor<[4,4],bf16>
// CHECK-NEXT:    torch.aten.t %[[DB]]
// d(W): each chunk's bf16 product is added into an f32 sum as it is made, and the sum rounded back to
// bf16 once, as eager's one matmul; the sum starts at zeros (new_zeros on the part's device), so the
// first part is not held until the second exists (each addition can write the sum in place)
// CHECK:         %[[DW0:[0-9]+]] = torch.aten._to_copy %{{[0-9]+}}, %int6, {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[Z:[0-9]+]] = torch.aten.new_zeros %{{[0-9]+}}, %{{[0-9]+}}, %int6, {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK-NEXT:    %[[S0:[0-9]+]] = torch.aten.add.Tensor %[[Z]], %[[DW0]], {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DW1:[0-9]+]] = torch.aten._to_copy %{{[0-9]+}}, %int6, {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK-NEXT:    %[[SUM:[0-9]+]] = torch.aten.add.Tensor %[[S0]], %[[DW1]], {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK-NOT:     vtensor<[8,16]
// CHECK:         %[[DW:[0-9]+]] = torch.aten._to_copy %[[SUM]], %int15, {{.*}} -> !torch.vtensor<[16,4],bf16>
// CHECK:         return %{{[0-9]+}}, %[[DW]], %{{[0-9]+}}

// HOST: "op": "aten._to_copy.default"

#head = loc("lm_head"("model.py":30:0))
#loss = loc("loss"("model.py":40:0))
func.func @train_step(%w: !torch.vtensor<[16,4],bf16>, %x: !torch.vtensor<[2,4,4],bf16>, %labels: !torch.vtensor<[2,4],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[16,4],bf16>, !torch.vtensor<[2,4,4],bf16>) attributes {sp.args = ["param:lm_head.weight", "input:x", "input:labels"], sp.results = ["loss", "grad:lm_head.weight", "grad:x"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int6 = torch.constant.int 6
  %int8 = torch.constant.int 8
  %int15 = torch.constant.int 15
  %int16 = torch.constant.int 16
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %s8x4 = torch.prim.ListConstruct %int8, %int4 : (!torch.int, !torch.int) -> !torch.list<int>
  %s2x4x16 = torch.prim.ListConstruct %int2, %int4, %int16 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %s8x16 = torch.prim.ListConstruct %int8, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %s8 = torch.prim.ListConstruct %int8 : (!torch.int) -> !torch.list<int>
  %s2x4x4 = torch.prim.ListConstruct %int2, %int4, %int4 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],bf16> -> !torch.vtensor<[4,16],bf16> loc(#head)
  %h = torch.aten.view %x, %s8x4 : !torch.vtensor<[2,4,4],bf16>, !torch.list<int> -> !torch.vtensor<[8,4],bf16> loc(#head)
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],bf16>, !torch.vtensor<[4,16],bf16> -> !torch.vtensor<[8,16],bf16> loc(#head)
  %l3 = torch.aten._unsafe_view %logits, %s2x4x16 : !torch.vtensor<[8,16],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,16],bf16> loc(#head)
  %f3 = torch.aten._to_copy %l3, %int6, %none, %none, %none, %false, %none : !torch.vtensor<[2,4,16],bf16>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[2,4,16],f32> loc(#loss)
  %l2 = torch.aten.view %f3, %s8x16 : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[8,16],f32> loc(#loss)
  %tgt = torch.aten.view %labels, %s8 : !torch.vtensor<[2,4],si64>, !torch.list<int> -> !torch.vtensor<[8],si64> loc(#loss)
  %logp = torch.aten._log_softmax %l2, %int1, %false : !torch.vtensor<[8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[8,16],f32> loc(#loss)
  %out, %tw = torch.aten.nll_loss_forward %logp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32> loc(#loss)
  %g = torch.aten.ones_like %out, %none, %none, %none, %false, %int1 : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[],f32> loc(#loss)
  %dlogp = torch.aten.nll_loss_backward %g, %logp, %tgt, %none, %int1, %int-100, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[8,16],f32> loc(#loss)
  %dx = torch.aten._log_softmax_backward_data %dlogp, %logp, %int1, %int6 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32> loc(#loss)
  %d3 = torch.aten.view %dx, %s2x4x16 : !torch.vtensor<[8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,16],f32> loc(#loss)
  %b3 = torch.aten._to_copy %d3, %int15, %none, %none, %none, %false, %none : !torch.vtensor<[2,4,16],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[2,4,16],bf16> loc(#loss)
  %d2 = torch.aten.view %b3, %s8x16 : !torch.vtensor<[2,4,16],bf16>, !torch.list<int> -> !torch.vtensor<[8,16],bf16> loc(#loss)
  %wtt = torch.aten.t %wt : !torch.vtensor<[4,16],bf16> -> !torch.vtensor<[16,4],bf16> loc(#head)
  %dh = torch.aten.mm %d2, %wtt : !torch.vtensor<[8,16],bf16>, !torch.vtensor<[16,4],bf16> -> !torch.vtensor<[8,4],bf16> loc(#loss)
  %dt = torch.aten.t %d2 : !torch.vtensor<[8,16],bf16> -> !torch.vtensor<[16,8],bf16> loc(#loss)
  %dw = torch.aten.mm %dt, %h : !torch.vtensor<[16,8],bf16>, !torch.vtensor<[8,4],bf16> -> !torch.vtensor<[16,4],bf16> loc(#head)
  %dh3 = torch.aten.view %dh, %s2x4x4 : !torch.vtensor<[8,4],bf16>, !torch.list<int> -> !torch.vtensor<[2,4,4],bf16> loc(#loss)
  return %out, %dw, %dh3 : !torch.vtensor<[],f32>, !torch.vtensor<[16,4],bf16>, !torch.vtensor<[2,4,4],bf16>
}
