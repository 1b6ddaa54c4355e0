// sp-tile-sequence{chunks=N}: a token-local region whose intermediates are wider than the hidden size
// (an MLP), forward and backward, runs in N chunks of each sequence's positions; nothing [tokens, F]
// is left. Weight and bias gradients are summed chunk by chunk, the rest concatenated.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=2})' | FileCheck %s
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=2})' | FileCheck %s --check-prefix=WHOLE
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{floor=0})' | FileCheck %s --check-prefix=DEFAULT
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{floor=128})' | FileCheck %s --check-prefix=FLOOR
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=1})' | FileCheck %s --check-prefix=ONE
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence)' | FileCheck %s --check-prefix=ONE
// The tiled step lowers to the host program: every op it emits is one the runtime executes.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=2})' --emit=host-program | FileCheck %s --check-prefix=HOST

// A SwiGLU MLP on one sequence of 8 local positions (sp=2 of 16), hidden D = 4, width F = 16, with
// its backward (the silu gradient decomposed, as captured). The loss depends on the forward ops;
// the backward reads the forward's chunk c in its chunk c.
// The module notes what was cut, for plan.json and `autospc inspect`.
// CHECK:       module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}, sp.tiles = [{chunks = 2 : i64, kind = "mlp", module = "model.layers.0.mlp", tokens = 8 : i64, width = 16 : i64}]}
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[WG:[0-9]+]] = torch.aten.t %arg0
// CHECK:         %[[WU:[0-9]+]] = torch.aten.t %arg1
// CHECK:         %[[WD:[0-9]+]] = torch.aten.t %arg2
// forward, chunk 0: positions [0, 4) through the whole MLP
// CHECK:         %[[H0:[0-9]+]] = torch.aten.slice.Tensor %arg4, %int0, %int0, %int4, %int1{{[_0-9]*}} {{.*}}: {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[G0:[0-9]+]] = torch.aten.mm %[[H0]], %[[WG]] {{.*}}: !torch.vtensor<[4,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[A0:[0-9]+]] = torch.aten.silu %[[G0]] {{.*}}: !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[U0:[0-9]+]] = torch.aten.mm %[[H0]], %[[WU]] {{.*}}: {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[P0:[0-9]+]] = torch.aten.mul.Tensor %[[A0]], %[[U0]]
// CHECK:         %[[Y0:[0-9]+]] = torch.aten.mm %[[P0]], %[[WD]] {{.*}}: !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,4],f32>
// chunk 1: positions [4, 8)
// CHECK:         %[[H1:[0-9]+]] = torch.aten.slice.Tensor %arg4, %int0, %int4, %int8, %int1{{[_0-9]*}} {{.*}}: {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[P1:[0-9]+]] = torch.aten.mul.Tensor
// CHECK:         %[[Y1:[0-9]+]] = torch.aten.mm %[[P1]], %[[WD]]
// CHECK:         %[[YS:[0-9]+]] = torch.prim.ListConstruct %[[Y0]], %[[Y1]]
// CHECK:         %[[Y:[0-9]+]] = torch.aten.cat %[[YS]], %int0 {{.*}} -> !torch.vtensor<[8,4],f32>
// CHECK:         %[[LOSS:[0-9]+]] = torch.aten.sum %[[Y]]
// backward: the transposed weights its chunks read move up before its first op
// CHECK:         %[[DYT:[0-9]+]] = torch.aten.t %arg5 {{.*}} -> !torch.vtensor<[4,8],f32>
// CHECK:         %[[WDT:[0-9]+]] = torch.aten.t %[[WD]]
// CHECK:         %[[WUT:[0-9]+]] = torch.aten.t %[[WU]]
// CHECK:         %[[WGT:[0-9]+]] = torch.aten.t %[[WG]]
// chunk 0: d(down weight) = t(dy)[:, 0:4] @ p_0, a contraction over the chunk's tokens
// CHECK:         %[[DYT0:[0-9]+]] = torch.aten.slice.Tensor %[[DYT]], %int1{{[_0-9]*}}, %int0{{[_0-9]*}}, %int4{{[_0-9]*}}, %int1{{[_0-9]*}} {{.*}}: {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[DWD0:[0-9]+]] = torch.aten.mm %[[DYT0]], %[[P0]] {{.*}}: !torch.vtensor<[4,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[DY0:[0-9]+]] = torch.aten.slice.Tensor %arg5, {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[DP0:[0-9]+]] = torch.aten.mm %[[DY0]], %[[WDT]] {{.*}}: {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:         torch.aten.mul.Tensor %[[DP0]], %[[U0]]
// CHECK:         %[[DU0:[0-9]+]] = torch.aten.mul.Tensor %[[DP0]], %[[A0]]
// CHECK:         %[[DUT0:[0-9]+]] = torch.aten.t %[[DU0]] {{.*}}: !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[HB0:[0-9]+]] = torch.aten.slice.Tensor %arg4, {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[DWU0:[0-9]+]] = torch.aten.mm %[[DUT0]], %[[HB0]] {{.*}}: !torch.vtensor<[16,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DH10:[0-9]+]] = torch.aten.mm %[[DU0]], %[[WUT]] {{.*}}: {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         torch.aten.sigmoid %[[G0]]
// CHECK:         %[[DWG0:[0-9]+]] = torch.aten.mm %{{[0-9]+}}, %[[HB0]] {{.*}}: {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DH20:[0-9]+]] = torch.aten.mm %{{[0-9]+}}, %[[WGT]] {{.*}}: {{.*}} -> !torch.vtensor<[4,4],f32>
// chunk 1 adds its contributions onto the weight gradients (addmm: no separate product is live)
// CHECK:         %[[DWD:[0-9]+]] = torch.aten.addmm %[[DWD0]], %{{[0-9]+}}, %[[P1]], %int1{{[_0-9]*}}, %int1{{[_0-9]*}} {{.*}}: {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[DWU:[0-9]+]] = torch.aten.addmm %[[DWU0]], {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DH11:[0-9]+]] = torch.aten.mm {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[DWG:[0-9]+]] = torch.aten.addmm %[[DWG0]], {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DH21:[0-9]+]] = torch.aten.mm {{.*}} -> !torch.vtensor<[4,4],f32>
// d(h): each input gradient's chunks concatenated along the tokens
// CHECK:         %[[L1:[0-9]+]] = torch.prim.ListConstruct %[[DH10]], %[[DH11]]
// CHECK:         %[[DH1:[0-9]+]] = torch.aten.cat %[[L1]], %int0{{[_0-9]*}} {{.*}} -> !torch.vtensor<[8,4],f32>
// CHECK:         %[[L2:[0-9]+]] = torch.prim.ListConstruct %[[DH20]], %[[DH21]]
// CHECK:         %[[DH2:[0-9]+]] = torch.aten.cat %[[L2]]
// CHECK:         %[[DH:[0-9]+]] = torch.aten.add.Tensor %[[DH1]], %[[DH2]]
// CHECK:         return %[[LOSS]], %[[DWG]], %[[DWU]], %[[DWD]], %[[DH]]

// 2 chunks: nothing [8, 16] (or its transpose) is left.
// WHOLE-LABEL: func.func @train_step(
// WHOLE-NOT:     vtensor<[8,16]
// WHOLE-NOT:     vtensor<[16,8]
// WHOLE:         return

// Without chunks or floor: the smallest N with a [8/N, 16] chunk <= 2 x the [8, 4] input, N = 8.
// DEFAULT-LABEL: func.func @train_step(
// DEFAULT-COUNT-8: torch.aten.silu {{.*}} -> !torch.vtensor<[1,16],f32>
// DEFAULT-NOT:     vtensor<[8,16]
// DEFAULT:         return

// floor=128: no chunk of the 512-byte [8, 16] fp32 values below 128 bytes, so N = 4, not 8.
// FLOOR-LABEL: func.func @train_step(
// FLOOR-COUNT-4:   torch.aten.silu {{.*}} -> !torch.vtensor<[2,16],f32>
// FLOOR-NOT:       torch.aten.silu
// FLOOR-NOT:       vtensor<[8,16]
// FLOOR:           return

// chunks=1, or the default floor (4MiB): unchanged.
// ONE-LABEL: func.func @train_step(
// ONE:         torch.aten.mm {{.*}} -> !torch.vtensor<[8,16],f32>
// ONE-NOT:     torch.aten.slice.Tensor
// ONE:         return

// HOST: "train_step"
// HOST: "op": "aten.slice.Tensor"
// HOST: "op": "aten.silu.default"
// HOST: "op": "aten.cat.default"
// HOST: "op": "aten.addmm.default"

#gate = loc("model.layers.0.mlp.gate_proj"("model.py":10:0))
#up = loc("model.layers.0.mlp.up_proj"("model.py":11:0))
#act = loc("model.layers.0.mlp.act_fn"("model.py":12:0))
#down = loc("model.layers.0.mlp.down_proj"("model.py":13:0))
module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}} {
func.func @train_step(%wg: !torch.vtensor<[16,4],f32>, %wu: !torch.vtensor<[16,4],f32>, %wd: !torch.vtensor<[4,16],f32>, %ids: !torch.vtensor<[1,16],si64>, %h: !torch.vtensor<[8,4],f32>, %dy: !torch.vtensor<[8,4],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,4],f32>) attributes {sp.args = ["param:gate_proj.weight", "param:up_proj.weight", "param:down_proj.weight", "input:input_ids", "input:h", "input:dy"], sp.arg_layouts = ["rep", "rep", "rep", "seq<1>", "seq<0>", "seq<0>"], sp.results = ["loss", "grad:gate_proj.weight", "grad:up_proj.weight", "grad:down_proj.weight", "grad:h"], sp.seq_len = 16 : i64} {
  %int1 = torch.constant.int 1
  %none = torch.constant.none
  %wgt = torch.aten.t %wg {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#gate)
  %g = torch.aten.mm %h, %wgt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#gate)
  %a = torch.aten.silu %g {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %wut = torch.aten.t %wu {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#up)
  %u = torch.aten.mm %h, %wut {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#up)
  %p = torch.aten.mul.Tensor %a, %u {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %wdt = torch.aten.t %wd {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#down)
  %y = torch.aten.mm %p, %wdt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#down)
  %loss = torch.aten.sum %y, %none {sp.layout = ["partial"]} : !torch.vtensor<[8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  %dyt = torch.aten.t %dy {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,4],f32> -> !torch.vtensor<[4,8],f32> loc(#down)
  %dwd = torch.aten.mm %dyt, %p {sp.layout = ["partial"]} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[4,16],f32> loc(#down)
  %wdtt = torch.aten.t %wdt {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#down)
  %dp = torch.aten.mm %dy, %wdtt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#down)
  %da = torch.aten.mul.Tensor %dp, %u {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %du = torch.aten.mul.Tensor %dp, %a {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %dut = torch.aten.t %du {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[16,8],f32> loc(#up)
  %dwu = torch.aten.mm %dut, %h {sp.layout = ["partial"]} : !torch.vtensor<[16,8],f32>, !torch.vtensor<[8,4],f32> -> !torch.vtensor<[16,4],f32> loc(#up)
  %wutt = torch.aten.t %wut {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#up)
  %dh1 = torch.aten.mm %du, %wutt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#up)
  %sg = torch.aten.sigmoid %g {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %rs = torch.aten.rsub.Scalar %sg, %int1, %int1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32> loc(#act)
  %gr = torch.aten.mul.Tensor %g, %rs {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %gr1 = torch.aten.add.Scalar %gr, %int1, %int1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32> loc(#act)
  %ds = torch.aten.mul.Tensor %sg, %gr1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %dg = torch.aten.mul.Tensor %da, %ds {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %dgt = torch.aten.t %dg {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[16,8],f32> loc(#gate)
  %dwg = torch.aten.mm %dgt, %h {sp.layout = ["partial"]} : !torch.vtensor<[16,8],f32>, !torch.vtensor<[8,4],f32> -> !torch.vtensor<[16,4],f32> loc(#gate)
  %wgtt = torch.aten.t %wgt {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#gate)
  %dh2 = torch.aten.mm %dg, %wgtt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#gate)
  %dh = torch.aten.add.Tensor %dh1, %dh2, %int1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[8,4],f32>, !torch.int -> !torch.vtensor<[8,4],f32>
  return %loss, %dwg, %dwu, %dwd, %dh : !torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,4],f32>
}
}
// -----
// A GELU MLP with biases (as GPT-NeoX's), on two sequences of 4 local positions (sp=2 of 8): the token
// rows of a [8, D] value are (sequence, position) pairs, so a chunk of positions is cut as a view
// [2, 4, D], a slice of dim 1 and a view back (a copy); the results are joined the same way. The
// bias gradient, a sum over the tokens, is summed chunk by chunk.
// CHECK-LABEL: func.func @gelu_bias_two_sequences(
// CHECK:         %[[HS:[0-9]+]] = torch.aten.view %arg5, %{{[0-9]+}} {{.*}} -> !torch.vtensor<[2,4,4],f32>
// CHECK:         %[[HS0:[0-9]+]] = torch.aten.slice.Tensor %[[HS]], %int1{{[_0-9]*}}, %int0{{[_0-9]*}}, %int2, %int1{{[_0-9]*}} {{.*}}: {{.*}} -> !torch.vtensor<[2,2,4],f32>
// CHECK:         %[[H0:[0-9]+]] = torch.aten.view %[[HS0]], {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[Z0:[0-9]+]] = torch.aten.addmm %arg1, %[[H0]], %{{[0-9]+}}, %int1, %int1 {{.*}}: {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:         torch.aten.view %[[Z0]], {{.*}} -> !torch.vtensor<[2,2,16],f32>
// CHECK:         torch.aten.gelu {{.*}} -> !torch.vtensor<[2,2,16],f32>
// CHECK:         %[[Y0:[0-9]+]] = torch.aten.addmm %arg3, {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         torch.aten.slice.Tensor %[[HS]], %int1{{[_0-9]*}}, %int2, %int4, {{.*}} -> !torch.vtensor<[2,2,4],f32>
// CHECK:         %[[Y1:[0-9]+]] = torch.aten.addmm %arg3, {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[Y0S:[0-9]+]] = torch.aten.view %[[Y0]], {{.*}} -> !torch.vtensor<[2,2,4],f32>
// CHECK:         %[[Y1S:[0-9]+]] = torch.aten.view %[[Y1]], {{.*}} -> !torch.vtensor<[2,2,4],f32>
// CHECK:         %[[YL:[0-9]+]] = torch.prim.ListConstruct %[[Y0S]], %[[Y1S]]
// CHECK:         %[[YC:[0-9]+]] = torch.aten.cat %[[YL]], %int1{{[_0-9]*}} {{.*}} -> !torch.vtensor<[2,4,4],f32>
// CHECK:         %[[Y:[0-9]+]] = torch.aten.view %[[YC]], {{.*}} -> !torch.vtensor<[8,4],f32>
// CHECK:         torch.aten.sum %[[Y]]
// backward: t(dy) [4, 8] is cut as [4, 2, 4] along its last dim
// CHECK:         %[[DYT:[0-9]+]] = torch.aten.t %arg6 {{.*}} -> !torch.vtensor<[4,8],f32>
// CHECK:         %[[DYTS:[0-9]+]] = torch.aten.view %[[DYT]], {{.*}} -> !torch.vtensor<[4,2,4],f32>
// CHECK:         torch.aten.slice.Tensor %[[DYTS]], %int2{{[_0-9]*}}, %int0{{[_0-9]*}}, %int2{{[_0-9]*}}, {{.*}} -> !torch.vtensor<[4,2,2],f32>
// CHECK:         %[[DW20:[0-9]+]] = torch.aten.mm %{{[0-9]+}}, %{{[0-9]+}} {{.*}}: !torch.vtensor<[4,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
// CHECK:         torch.aten.gelu_backward {{.*}} -> !torch.vtensor<[2,2,16],f32>
// CHECK:         %[[DB0:[0-9]+]] = torch.aten.sum.dim_IntList {{.*}} -> !torch.vtensor<[1,16],f32>
// CHECK:         %[[DW2:[0-9]+]] = torch.aten.addmm %[[DW20]], {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[DW1:[0-9]+]] = torch.aten.addmm {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DB1:[0-9]+]] = torch.aten.sum.dim_IntList {{.*}} -> !torch.vtensor<[1,16],f32>
// CHECK:         %[[DB:[0-9]+]] = torch.aten.add.Tensor %[[DB0]], %[[DB1]], %int1{{[_0-9]*}} {{.*}} -> !torch.vtensor<[1,16],f32>
// CHECK:         torch.aten.cat {{.*}} -> !torch.vtensor<[2,4,4],f32>
// CHECK:         %[[DH:[0-9]+]] = torch.aten.view {{.*}} -> !torch.vtensor<[8,4],f32>
// CHECK:         %[[DBV:[0-9]+]] = torch.aten.view %[[DB]]
// CHECK:         return %{{[0-9]+}}, %[[DW1]], %[[DBV]], %[[DW2]], %[[DH]]

// WHOLE-LABEL: func.func @gelu_bias_two_sequences(
// WHOLE-NOT:     vtensor<[8,16]
// WHOLE-NOT:     vtensor<[2,4,16]
// WHOLE-NOT:     vtensor<[16,8]
// WHOLE:         return

// Without chunks or floor: N = 2 x 16 / 4 = 8, clamped to the 4 positions of a sequence.
// DEFAULT-LABEL: func.func @gelu_bias_two_sequences(
// DEFAULT-COUNT-4: torch.aten.gelu {{.*}} -> !torch.vtensor<[2,1,16],f32>
// DEFAULT:         return

#fc1 = loc("model.layers.0.mlp.dense_h_to_4h"("model.py":20:0))
#act = loc("model.layers.0.mlp.act"("model.py":21:0))
#fc2 = loc("model.layers.0.mlp.dense_4h_to_h"("model.py":22:0))
module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}} {
func.func @gelu_bias_two_sequences(%w1: !torch.vtensor<[16,4],f32>, %b1: !torch.vtensor<[16],f32>, %w2: !torch.vtensor<[4,16],f32>, %b2: !torch.vtensor<[4],f32>, %ids: !torch.vtensor<[2,8],si64>, %h: !torch.vtensor<[8,4],f32>, %dy: !torch.vtensor<[8,4],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[16],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,4],f32>) attributes {sp.args = ["param:fc1.weight", "param:fc1.bias", "param:fc2.weight", "param:fc2.bias", "input:input_ids", "input:h", "input:dy"], sp.arg_layouts = ["rep", "rep", "rep", "rep", "seq<1>", "seq<0>", "seq<0>"], sp.results = ["loss", "grad:fc1.weight", "grad:fc1.bias", "grad:fc2.weight", "grad:h"], sp.seq_len = 8 : i64} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %true = torch.constant.bool true
  %none = torch.constant.none
  %str = torch.constant.str "none"
  %s2x4x16 = torch.prim.ListConstruct %int2, %int4, %int16 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %s8x16 = torch.prim.ListConstruct %int8, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %s16 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %d0 = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %w1t = torch.aten.t %w1 {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#fc1)
  %z = torch.aten.addmm %b1, %h, %w1t, %int1, %int1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[16],f32>, !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32> loc(#fc1)
  %z3 = torch.aten.view %z, %s2x4x16 {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,16],f32> loc(#fc1)
  %a3 = torch.aten.gelu %z3, %str {sp.layout = ["seq<1>"]} : !torch.vtensor<[2,4,16],f32>, !torch.str -> !torch.vtensor<[2,4,16],f32> loc(#act)
  %a = torch.aten.view %a3, %s8x16 {sp.layout = ["seq<0>"]} : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[8,16],f32> loc(#fc2)
  %w2t = torch.aten.t %w2 {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#fc2)
  %y = torch.aten.addmm %b2, %a, %w2t, %int1, %int1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[4],f32>, !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,4],f32> loc(#fc2)
  %loss = torch.aten.sum %y, %none {sp.layout = ["partial"]} : !torch.vtensor<[8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  %w2tt = torch.aten.t %w2t {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#fc2)
  %da = torch.aten.mm %dy, %w2tt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#fc2)
  %dyt = torch.aten.t %dy {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,4],f32> -> !torch.vtensor<[4,8],f32> loc(#fc2)
  %dw2 = torch.aten.mm %dyt, %a {sp.layout = ["partial"]} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[4,16],f32> loc(#fc2)
  %da3 = torch.aten.view %da, %s2x4x16 {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,16],f32> loc(#fc2)
  %dz3 = torch.aten.gelu_backward %da3, %z3, %str {sp.layout = ["seq<1>"]} : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[2,4,16],f32>, !torch.str -> !torch.vtensor<[2,4,16],f32> loc(#act)
  %dz = torch.aten.view %dz3, %s8x16 {sp.layout = ["seq<0>"]} : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[8,16],f32> loc(#fc1)
  %w1tt = torch.aten.t %w1t {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#fc1)
  %dh = torch.aten.mm %dz, %w1tt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#fc1)
  %dzt = torch.aten.t %dz {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[16,8],f32> loc(#fc1)
  %dw1 = torch.aten.mm %dzt, %h {sp.layout = ["partial"]} : !torch.vtensor<[16,8],f32>, !torch.vtensor<[8,4],f32> -> !torch.vtensor<[16,4],f32> loc(#fc1)
  %db1 = torch.aten.sum.dim_IntList %dz, %d0, %true, %none {sp.layout = ["partial"]} : !torch.vtensor<[8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[1,16],f32> loc(#fc1)
  %db1v = torch.aten.view %db1, %s16 {sp.layout = ["partial"]} : !torch.vtensor<[1,16],f32>, !torch.list<int> -> !torch.vtensor<[16],f32> loc(#fc1)
  return %loss, %dw1, %db1v, %dw2, %dh : !torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[16],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,4],f32>
}
}
// -----
// The wide value is also a result of the step: it is whole anyway, so the region is left alone.
// CHECK-LABEL: func.func @wide_value_returned(
// CHECK:         torch.aten.mm {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK-NOT:     torch.aten.slice.Tensor
// CHECK:         return
func.func @wide_value_returned(%wu: !torch.vtensor<[16,4],f32>, %wd: !torch.vtensor<[4,16],f32>, %ids: !torch.vtensor<[1,8],si64>, %h: !torch.vtensor<[8,4],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[8,16],f32>) attributes {sp.args = ["param:up_proj.weight", "param:down_proj.weight", "input:input_ids", "input:h"], sp.arg_layouts = ["rep", "rep", "seq<1>", "seq<0>"], sp.results = ["loss", "act"], sp.seq_len = 8 : i64} {
  %none = torch.constant.none
  %wut = torch.aten.t %wu {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
  %u = torch.aten.mm %h, %wut {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32>
  %a = torch.aten.silu %u {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32>
  %wdt = torch.aten.t %wd {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32>
  %y = torch.aten.mm %a, %wdt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32>
  %loss = torch.aten.sum %y, %none {sp.layout = ["partial"]} : !torch.vtensor<[8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %loss, %a : !torch.vtensor<[],f32>, !torch.vtensor<[8,16],f32>
}
// -----
// A fused gate/up projection (as Phi-3's): one [8, 32] product split into the two [8, 16] halves
// along the features, and their gradients concatenated back. Split and cat along a feature dim are
// token-local: each chunk splits and concatenates its own rows.
// CHECK-LABEL: func.func @fused_gate_up(
// CHECK:         %[[H0:[0-9]+]] = torch.aten.slice.Tensor %arg3, {{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[GU0:[0-9]+]] = torch.aten.mm %[[H0]], {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:         %[[S0:[0-9]+]] = torch.aten.split.Tensor %[[GU0]], %int16, %int-1 {{.*}} -> !torch.list<vtensor>
// CHECK:         %[[P0:[0-9]+]]:2 = torch.prim.ListUnpack %[[S0]] {{.*}} -> !torch.vtensor<[4,16],f32>, !torch.vtensor<[4,16],f32>
// CHECK:         torch.aten.silu %[[P0]]#0
// CHECK:         torch.aten.split.Tensor
// CHECK:         torch.aten.cat
// backward, chunk 0: the two halves' gradients concatenated along the features, [4, 32]
// CHECK:         %[[L0:[0-9]+]] = torch.prim.ListConstruct %{{[0-9]+}}, %{{[0-9]+}} {{.*}} -> !torch.list<vtensor>
// CHECK:         %[[D0:[0-9]+]] = torch.aten.cat %[[L0]], %int1 {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:         torch.aten.mm %{{[0-9]+}}, %[[H0B:[0-9]+]] {{.*}} -> !torch.vtensor<[32,4],f32>
// CHECK:         torch.prim.ListConstruct
// CHECK:         %[[D1:[0-9]+]] = torch.aten.cat {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:         torch.aten.addmm
// CHECK:         return

// WHOLE-LABEL: func.func @fused_gate_up(
// WHOLE-NOT:     vtensor<[8,16]
// WHOLE-NOT:     vtensor<[8,32]
// WHOLE-NOT:     vtensor<[32,8]
// WHOLE:         return

#gu = loc("model.layers.0.mlp.gate_up_proj"("model.py":40:0))
#act = loc("model.layers.0.mlp.activation_fn"("model.py":41:0))
#down = loc("model.layers.0.mlp.down_proj"("model.py":42:0))
module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}} {
func.func @fused_gate_up(%wgu: !torch.vtensor<[32,4],f32>, %wd: !torch.vtensor<[4,16],f32>, %ids: !torch.vtensor<[1,16],si64>, %h: !torch.vtensor<[8,4],f32>, %dy: !torch.vtensor<[8,4],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[32,4],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,4],f32>) attributes {sp.args = ["param:gate_up_proj.weight", "param:down_proj.weight", "input:input_ids", "input:h", "input:dy"], sp.arg_layouts = ["rep", "rep", "seq<1>", "seq<0>", "seq<0>"], sp.results = ["loss", "grad:gate_up_proj.weight", "grad:down_proj.weight", "grad:h"], sp.seq_len = 16 : i64} {
  %int1 = torch.constant.int 1
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %none = torch.constant.none
  %wgut = torch.aten.t %wgu {sp.layout = ["rep"]} : !torch.vtensor<[32,4],f32> -> !torch.vtensor<[4,32],f32> loc(#gu)
  %gu = torch.aten.mm %h, %wgut {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,32],f32> -> !torch.vtensor<[8,32],f32> loc(#gu)
  %parts = torch.aten.split.Tensor %gu, %int16, %int-1 {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,32],f32>, !torch.int, !torch.int -> !torch.list<vtensor> loc(#gu)
  %g, %u = torch.prim.ListUnpack %parts {sp.layout = ["seq<0>", "seq<0>"]} : !torch.list<vtensor> -> !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> loc(#gu)
  %a = torch.aten.silu %g {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %p = torch.aten.mul.Tensor %u, %a {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %wdt = torch.aten.t %wd {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#down)
  %y = torch.aten.mm %p, %wdt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#down)
  %loss = torch.aten.sum %y, %none {sp.layout = ["partial"]} : !torch.vtensor<[8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  %dyt = torch.aten.t %dy {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,4],f32> -> !torch.vtensor<[4,8],f32> loc(#down)
  %dwd = torch.aten.mm %dyt, %p {sp.layout = ["partial"]} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[4,16],f32> loc(#down)
  %wdtt = torch.aten.t %wdt {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#down)
  %dp = torch.aten.mm %dy, %wdtt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#down)
  %du = torch.aten.mul.Tensor %dp, %a {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %da = torch.aten.mul.Tensor %dp, %u {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %sg = torch.aten.sigmoid %g {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %dg = torch.aten.mul.Tensor %da, %sg {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[8,16],f32> loc(#act)
  %dl = torch.prim.ListConstruct %dg, %du {sp.layout = ["seq<0>"]} : (!torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32>) -> !torch.list<vtensor> loc(#gu)
  %dgu = torch.aten.cat %dl, %int1 {sp.layout = ["seq<0>"]} : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[8,32],f32> loc(#gu)
  %dgut = torch.aten.t %dgu {sp.layout = ["seq<1>"]} : !torch.vtensor<[8,32],f32> -> !torch.vtensor<[32,8],f32> loc(#gu)
  %dwgu = torch.aten.mm %dgut, %h {sp.layout = ["partial"]} : !torch.vtensor<[32,8],f32>, !torch.vtensor<[8,4],f32> -> !torch.vtensor<[32,4],f32> loc(#gu)
  %wgutt = torch.aten.t %wgut {sp.layout = ["rep"]} : !torch.vtensor<[4,32],f32> -> !torch.vtensor<[32,4],f32> loc(#gu)
  %dh = torch.aten.mm %dgu, %wgutt {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,32],f32>, !torch.vtensor<[32,4],f32> -> !torch.vtensor<[8,4],f32> loc(#gu)
  return %loss, %dwgu, %dwd, %dh : !torch.vtensor<[],f32>, !torch.vtensor<[32,4],f32>, !torch.vtensor<[4,16],f32>, !torch.vtensor<[8,4],f32>
}
}
