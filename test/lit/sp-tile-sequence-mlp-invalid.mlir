// sp-tile-sequence{chunks=N} on a token-local region: N may not exceed the local positions of a
// sequence, the dim the region is cut along; the error is at the region's first projection.
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-tile-sequence{chunks=5})' 2>&1 | FileCheck %s

// CHECK: loc("model.layers.0.mlp.fc1"("model.py":20:0)): error: sp-tile-sequence: chunks=5 exceeds the 4 local positions per sequence that a token-local region is cut along ([8, 16] intermediates of [8, 4] inputs)
#fc1 = loc("model.layers.0.mlp.fc1"("model.py":20:0))
#fc2 = loc("model.layers.0.mlp.fc2"("model.py":22:0))
module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}} {
func.func @mlp(%w1: !torch.vtensor<[16,4],f32>, %w2: !torch.vtensor<[4,16],f32>, %ids: !torch.vtensor<[2,8],si64>, %h: !torch.vtensor<[8,4],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:fc1.weight", "param:fc2.weight", "input:input_ids", "input:h"], sp.arg_layouts = ["rep", "rep", "seq<1>", "seq<0>"], sp.results = ["loss"], sp.seq_len = 8 : i64} {
  %none = torch.constant.none
  %str = torch.constant.str "none"
  %w1t = torch.aten.t %w1 {sp.layout = ["rep"]} : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#fc1)
  %z = torch.aten.mm %h, %w1t {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#fc1)
  %a = torch.aten.gelu %z, %str {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.str -> !torch.vtensor<[8,16],f32> loc(#fc1)
  %w2t = torch.aten.t %w2 {sp.layout = ["rep"]} : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#fc2)
  %y = torch.aten.mm %a, %w2t {sp.layout = ["seq<0>"]} : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#fc2)
  %loss = torch.aten.sum %y, %none {sp.layout = ["partial"]} : !torch.vtensor<[8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %loss : !torch.vtensor<[],f32>
}
}
