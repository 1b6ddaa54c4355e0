// sp-plan-remat{policy=...}: split the step into @forward / @backward; decide per policy which
// forward values the forward returns (saved) and which the backward recomputes. Layers come from
// the locations' module paths; collectives are never recomputed; sac keeps attention results.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=none})' | FileCheck %s --check-prefix=NONE
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=full})' | FileCheck %s --check-prefix=FULL
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=sac})' | FileCheck %s --check-prefix=SAC
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=most})' 2>&1 | FileCheck %s --check-prefix=BAD

// none saves every forward value the backward reads: %a, %r, %o, %s.
// NONE-LABEL: func.func @forward(%arg0: !torch.vtensor<[2,4,8,8],f32>, %arg1: !torch.vtensor<[2,4,8,8],f32>)
// NONE-SAME:    attributes {{{.*}}sp.args = ["param:w", "input:x"], sp.remat = "none", sp.results = ["loss", "saved:0", "saved:1", "saved:2", "saved:3"]}
// NONE:         return %{{.*}}, %[[A:[0-9]+]], %[[R:[0-9]+]], %[[O:[0-9]+]]#0, %[[O]]#1
// NONE-LABEL: func.func @backward(
// NONE-SAME:    sp.args = ["param:w", "input:x", "saved:0", "saved:1", "saved:2", "saved:3"], sp.recomputed = {bytes = 0 : i64, flops = 0 : i64, ops = 0 : i64}, sp.results = ["grad:w"]
// NONE-NOT:     torch.aten.mul.Tensor %arg0
// NONE-NOT:     "sp.all_reduce"
// NONE-NOT:     "sp.attention"(
// NONE:         "sp.attention_grad"
// NONE-NOT:     @train_step

// full saves what crosses a layer boundary (%r read by layer 1, the attention output read by
// lm_head) and collective results (%r); the layer-0 product %a and the attention (for its softmax
// statistics) are recomputed in @backward, each just before its first reader.
// FULL-LABEL: func.func @forward(
// FULL-SAME:    sp.results = ["loss", "saved:0", "saved:1"]
// FULL:         %[[R:[0-9]+]] = "sp.all_reduce"
// FULL:         %[[FO:[0-9]+]]:2 = "sp.attention"
// FULL:         return %{{.*}}, %[[R]], %[[FO]]#0 :
// FULL-LABEL: func.func @backward(%arg0: !torch.vtensor<[2,4,8,8],f32>, %arg1: !torch.vtensor<[2,4,8,8],f32>, %arg2: !torch.vtensor<[2,4,8,8],f32>, %arg3: !torch.vtensor<[2,4,8,8],f32>)
// The recompute cost (sp_plan_remat_auto.py's model): causal attention 4 x 512 x 8 / 2 FLOPs, the product 512.
// FULL-SAME:    sp.recomputed = {bytes = 14592 : i64, flops = 8704 : i64, ops = 2 : i64}
// FULL-NOT:     "sp.all_reduce"
// FULL:         %[[O:[0-9]+]]:2 = "sp.attention"(%arg2, %arg2, %arg2)
// FULL-NEXT:    %[[G:[0-9]+]]:3 = "sp.attention_grad"(%{{.*}}, %arg2, %arg2, %arg2, %arg3, %[[O]]#1)
// FULL-NEXT:    %[[A:[0-9]+]] = torch.aten.mul.Tensor %arg1, %arg0
// FULL-NEXT:    torch.aten.mul.Tensor %[[G]]#0, %[[A]]

// sac keeps the attention results and recomputes the cheap product where it is read.
// SAC-LABEL: func.func @forward(
// SAC-SAME:    sp.results = ["loss", "saved:0", "saved:1", "saved:2"]
// SAC:         return %{{.*}}, %[[R:[0-9]+]], %[[O:[0-9]+]]#0, %[[O]]#1
// SAC-LABEL: func.func @backward(
// SAC-SAME:     sp.recomputed = {bytes = 6144 : i64, flops = 512 : i64, ops = 1 : i64}
// SAC-NOT:      "sp.attention"(
// SAC:          %[[G:[0-9]+]]:3 = "sp.attention_grad"(%{{.*}}, %arg2, %arg2, %arg2, %arg3, %arg4)
// SAC-NEXT:     %[[A:[0-9]+]] = torch.aten.mul.Tensor %arg1, %arg0
// SAC-NEXT:     torch.aten.mul.Tensor %[[G]]#0, %[[A]]

// BAD: error: sp-plan-remat: policy='most' is not one of none, full, sac, auto{{$}}
#l0 = loc("model.layers.0.mlp"("model.py":10:0))
#l1 = loc("model.layers.1.self_attn"("model.py":20:0))
#top = loc("lm_head"("model.py":30:0))
func.func @train_step(%w: !torch.vtensor<[2,4,8,8],f32>, %x: !torch.vtensor<[2,4,8,8],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,4,8,8],f32>) attributes {sp.args = ["param:w", "input:x"], sp.results = ["loss", "grad:w"]} {
  %none = torch.constant.none
  %a = torch.aten.mul.Tensor %x, %w : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %r = "sp.all_reduce"(%a) {group = "sp", op = "sum"} : (!torch.vtensor<[2,4,8,8],f32>) -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %o:2 = "sp.attention"(%r, %r, %r) {causal = true, kv_groups = 1 : i64, scale = 0.35 : f64, window = 0 : i64} : (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>) -> (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8],f32>) loc(#l1)
  %loss = torch.aten.sum %o#0, %none : !torch.vtensor<[2,4,8,8],f32>, !torch.none -> !torch.vtensor<[],f32> loc(#top)
  %seed = torch.aten.ones_like %o#0, %none, %none, %none, %none, %none : !torch.vtensor<[2,4,8,8],f32>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[2,4,8,8],f32> loc(#top)
  %g:3 = "sp.attention_grad"(%seed, %r, %r, %r, %o#0, %o#1) {causal = true, kv_groups = 1 : i64, scale = 0.35 : f64, window = 0 : i64} : (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>) loc(#l1)
  %gw = torch.aten.mul.Tensor %g#0, %a : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  return %loss, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[2,4,8,8],f32>
}
