// sp-plan-remat: dropout is never recomputed, under every policy: recomputing would draw a new
// mask; @forward returns its output and (bool) mask as saved values and @backward reads them.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=none})' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=sac})' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=full})' | FileCheck %s
// CHECK-LABEL: func.func @forward(
// CHECK-SAME:    sp.results = ["loss", "saved:0", "saved:1"]
// CHECK:         %[[OUT:[0-9a-z_]+]], %[[MASK:[0-9a-z_]+]] = torch.aten.native_dropout
// CHECK:         return %{{[0-9]+}}, %[[MASK]], %[[OUT]] : !torch.vtensor<[],f32>, !torch.vtensor<[2,8,16],i1>, !torch.vtensor<[2,8,16],f32>
// CHECK-LABEL: func.func @backward(%arg0: !torch.vtensor<[2,8,16],f32>, %arg1: !torch.vtensor<[2,8,16],f32>, %arg2: !torch.vtensor<[2,8,16],i1>, %arg3: !torch.vtensor<[2,8,16],f32>)
// CHECK-NOT:     torch.aten.native_dropout %
// CHECK:         %[[SEED:[0-9]+]] = torch.aten.ones_like %arg0
// CHECK-NEXT:    %[[G:[0-9]+]] = torch.aten.mul.Tensor %[[SEED]], %arg0
// CHECK:         torch.aten.native_dropout_backward %[[G]], %arg2
// CHECK:         torch.aten.mul.Tensor %[[SEED]], %arg3
// CHECK-NOT:     torch.aten.native_dropout %
#l0 = loc("model.layers.0.mlp"("model.py":10:0))
func.func @train_step(%w: !torch.vtensor<[2,8,16],f32>, %x: !torch.vtensor<[2,8,16],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,8,16],f32>) attributes {sp.args = ["param:w", "input:x"], sp.results = ["loss", "grad:w"]} {
  %none = torch.constant.none
  %int1 = torch.constant.int 1
  %true = torch.constant.bool true
  %p = torch.constant.float 1.000000e-01
  %scale = torch.constant.float 1.1111111111111112
  %a = torch.aten.mul.Tensor %x, %w : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %d, %mask = torch.aten.native_dropout %a, %p, %true : !torch.vtensor<[2,8,16],f32>, !torch.float, !torch.bool -> !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],i1> loc(#l0)
  %y = torch.aten.mul.Tensor %d, %w : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %loss = torch.aten.sum %y, %none : !torch.vtensor<[2,8,16],f32>, !torch.none -> !torch.vtensor<[],f32> loc(#l0)
  %seed = torch.aten.ones_like %w, %none, %none, %none, %none, %none : !torch.vtensor<[2,8,16],f32>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %gd = torch.aten.mul.Tensor %seed, %w : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %ga = torch.aten.native_dropout_backward %gd, %mask, %scale : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],i1>, !torch.float -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %gw1 = torch.aten.mul.Tensor %ga, %x : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %gw2 = torch.aten.mul.Tensor %seed, %d : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  %gw = torch.aten.add.Tensor %gw1, %gw2, %int1 : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8,16],f32>, !torch.int -> !torch.vtensor<[2,8,16],f32> loc(#l0)
  return %loss, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[2,8,16],f32>
}
