// sp-plan-remat{policy=auto budget=B}: the per-value plan with the least recompute cost whose
// predicted peak (sp-plan-memory's simulation of each candidate) fits B. Plans: none; else sac and
// full, each with a greedy prefix of extra values kept ("sac+k/n": the first k of n), bisected.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=auto budget=1GiB})' | FileCheck %s --check-prefix=ROOMY
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=auto budget=24000})' | FileCheck %s --check-prefix=MIXED
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=auto budget=22000})' | FileCheck %s --check-prefix=TIGHT
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=auto budget=20000})' 2>&1 | FileCheck %s --check-prefix=OVER
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat{policy=auto})' 2>&1 | FileCheck %s --check-prefix=NOBUDGET

// Everything saved fits (peak 24832 B): none, nothing recomputed, no other plan simulated.
// ROOMY: module attributes {sp.remat_auto = {budget_bytes = 1073741824 : i64, chosen = "none", plans = {none = {predicted_peak_bytes = 24832 : i64, recompute_bytes = 0 : i64, recompute_flops = 0 : i64, recompute_ns = 0 : i64}}}}
// ROOMY:       func.func @forward(
// ROOMY-SAME:    sp.remat = "none", sp.results = ["loss", "saved:0", "saved:1", "saved:2", "saved:3", "saved:4"]

// 24000 B: none (24832) does not fit; sac fits (20736) at 3 ns of recompute; sac plus the greedy's
// first pick, the product %a kept, fits too (22784) at 1 ns: chosen. The backward recomputes only
// exp(%a), the one value left to recompute.
// MIXED: module attributes {sp.remat_auto = {budget_bytes = 24000 : i64, chosen = "sac+1/2", plans = {
// MIXED-SAME:  none = {predicted_peak_bytes = 24832 : i64,
// MIXED-SAME:  sac = {predicted_peak_bytes = 20736 : i64, recompute_bytes = 10240 : i64, recompute_flops = 1024 : i64, recompute_ns = 3 : i64}
// MIXED-SAME:  "sac+1/2" = {predicted_peak_bytes = 22784 : i64, recompute_bytes = 4096 : i64, recompute_flops = 512 : i64, recompute_ns = 1 : i64}
// MIXED:       func.func @forward(
// MIXED-SAME:    sp.remat = "auto", sp.results = ["loss", "saved:0", "saved:1", "saved:2", "saved:3"]
// MIXED:         %[[A:[0-9]+]] = torch.aten.mul.Tensor %arg1, %arg0
// MIXED:         %[[C:[0-9]+]] = torch.aten.mul.Tensor %{{[0-9]+}}, %[[A]]
// MIXED:         %[[O:[0-9]+]]:2 = "sp.attention"(%[[C]], %[[C]], %[[C]])
// MIXED:         return %{{[0-9]+}}, %[[A]], %[[C]], %[[O]]#0, %[[O]]#1 :
// MIXED:       func.func @backward(
// MIXED-NOT:     torch.aten.mul.Tensor %arg1, %arg0
// MIXED:         torch.aten.exp %arg2
// MIXED-NOT:     torch.aten.exp
// MIXED:         return

// 22000 B: no extra value fits beside sac's: sac itself.
// TIGHT: chosen = "sac"
// TIGHT:       func.func @forward(
// TIGHT-SAME:    sp.remat = "sac", sp.results = ["loss", "saved:0", "saved:1", "saved:2"]

// 20000 B: nothing fits; the error names the smallest peak, its plan and what dominates it.
// OVER: error: sp-plan-remat: no remat plan fits the budget 19.5 KiB: the smallest predicted peak is 20.2 KiB per rank (policy sac), dominated by transient (12.0 KiB); parameters 2.0 KiB, gradients 0 B, inputs 2.0 KiB, saved 4.2 KiB, transient 12.0 KiB, comm 0 B
// NOBUDGET: error: sp-plan-remat: policy=auto needs budget=BYTES (e.g. budget=12GiB)
#l0 = loc("model.layers.0.mlp"("model.py":10:0))
#l1 = loc("model.layers.1.self_attn"("model.py":20:0))
#top = loc("lm_head"("model.py":30:0))
func.func @train_step(%w: !torch.vtensor<[2,4,8,8],f32>, %x: !torch.vtensor<[2,4,8,8],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,4,8,8],f32>) attributes {sp.args = ["param:w", "input:x"], sp.results = ["loss", "grad:w"]} {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %a = torch.aten.mul.Tensor %x, %w : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %b = torch.aten.exp %a : !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %c = torch.aten.mul.Tensor %b, %a : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %o:2 = "sp.attention"(%c, %c, %c) {causal = true, kv_groups = 1 : i64, scale = 0.35 : f64, window = 0 : i64} : (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>) -> (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8],f32>) loc(#l1)
  %loss = torch.aten.sum %o#0, %none : !torch.vtensor<[2,4,8,8],f32>, !torch.none -> !torch.vtensor<[],f32> loc(#top)
  %seed = torch.aten.ones_like %o#0, %none, %none, %none, %none, %none : !torch.vtensor<[2,4,8,8],f32>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[2,4,8,8],f32> loc(#top)
  %g:3 = "sp.attention_grad"(%seed, %c, %c, %c, %o#0, %o#1) {causal = true, kv_groups = 1 : i64, scale = 0.35 : f64, window = 0 : i64} : (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>) loc(#l1)
  %gqk = torch.aten.add.Tensor %g#0, %g#1, %int1 : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.int -> !torch.vtensor<[2,4,8,8],f32> loc(#l1)
  %gc = torch.aten.add.Tensor %gqk, %g#2, %int1 : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.int -> !torch.vtensor<[2,4,8,8],f32> loc(#l1)
  %gb = torch.aten.mul.Tensor %gc, %a : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %ga1 = torch.aten.mul.Tensor %gc, %b : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %ga2 = torch.aten.mul.Tensor %gb, %b : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %ga = torch.aten.add.Tensor %ga1, %ga2, %int1 : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.int -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  %gw = torch.aten.mul.Tensor %ga, %x : !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32> -> !torch.vtensor<[2,4,8,8],f32> loc(#l0)
  return %loss, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[2,4,8,8],f32>
}
