// sp-plan-remat: a gradient the forward already computed (it does not read the loss seed) still
// reaches @backward's results: saved under none, recomputed under sac.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=none})' | FileCheck %s --check-prefix=NONE
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=sac})' | FileCheck %s --check-prefix=SAC
// NONE-LABEL: func.func @forward(
// NONE-SAME:    sp.results = ["loss", "saved:0"]
// NONE:         %[[G:[0-9]+]] = torch.aten.neg %arg0
// NONE:         return %{{[0-9]+}}, %[[G]]
// NONE-LABEL: func.func @backward(%arg0: !torch.vtensor<[4],f32>, %arg1: !torch.vtensor<[4],f32>)
// NONE-NEXT:    return %arg1
// SAC-LABEL:  func.func @backward(%arg0: !torch.vtensor<[4],f32>)
// SAC-NEXT:     %[[G:[0-9]+]] = torch.aten.neg %arg0
// SAC-NEXT:     return %[[G]]
func.func @train_step(%w: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[4],f32>) attributes {sp.args = ["param:w"], sp.results = ["loss", "grad:w"]} {
  %none = torch.constant.none
  %g = torch.aten.neg %w : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %loss = torch.aten.sum %g, %none : !torch.vtensor<[4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %loss, %g : !torch.vtensor<[],f32>, !torch.vtensor<[4],f32>
}
