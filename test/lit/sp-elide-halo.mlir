// sp-elide-halo: a halo over a shard of a replicated value becomes the shift of the whole value (slice
// from `width`, pad the end with `fill`), then this rank's shard of it: no exchange. A halo over a
// value computed on this rank, or over a shard cut along another dim, stays.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-elide-halo)' | FileCheck %s

// CHECK-LABEL: func.func @labels(
// CHECK-SAME:    %[[L:.*]]: !torch.vtensor<[2,8],si64>
// CHECK-NOT:     sp.halo
// CHECK:         %[[REST:.*]] = torch.aten.slice.Tensor %[[L]], %int1, %int1, %int9223372036854775807, %int1 {{.*}} -> !torch.vtensor<[2,7],si64>
// CHECK:         %[[FILL:.*]] = torch.constant.float -1.000000e+02
// CHECK:         %[[PAD:.*]] = torch.prim.ListConstruct %int0, %int1
// CHECK:         %[[SHIFTED:.*]] = torch.aten.constant_pad_nd %[[REST]], %[[PAD]], %[[FILL]] {{.*}} -> !torch.vtensor<[2,8],si64>
// CHECK:         %[[MINE:.*]] = "sp.shard_slice"(%[[SHIFTED]]) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64>
// CHECK-NOT:     sp.shard_slice
// CHECK:         return %[[MINE]]
func.func @labels(%labels: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64> {
  %s = "sp.shard_slice"(%labels) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64>
  %h = "sp.halo"(%s) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4],si64>
  return %h : !torch.vtensor<[2,4],si64>
}

// -----

// A shift by 2 along dim 1 of a rank-3 value pads (last dim: 0, 0; dim 1: 0, 2); the shard is still
// read by another op, so it stays.
// CHECK-LABEL: func.func @wider(
// CHECK:         %[[S:.*]] = "sp.shard_slice"(%arg0) {dim = 1 : i64, group = "sp"}
// CHECK:         torch.aten.slice.Tensor %arg0, %int1, %int2, {{.*}} -> !torch.vtensor<[2,6,3],f32>
// CHECK:         %[[PAD:.*]] = torch.prim.ListConstruct %int0, %int0, %int0, %int2
// CHECK:         torch.aten.constant_pad_nd %{{.*}}, %[[PAD]], %{{.*}} -> !torch.vtensor<[2,8,3],f32>
// CHECK:         "sp.shard_slice"(%{{.*}}) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8,3],f32>) -> !torch.vtensor<[2,4,3],f32>
// CHECK:         torch.aten.neg %[[S]]
func.func @wider(%x: !torch.vtensor<[2,8,3],f32>) -> (!torch.vtensor<[2,4,3],f32>, !torch.vtensor<[2,4,3],f32>) {
  %s = "sp.shard_slice"(%x) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8,3],f32>) -> !torch.vtensor<[2,4,3],f32>
  %h = "sp.halo"(%s) {dim = 1 : i64, width = 2 : i64, fill = 0.0 : f64, group = "sp"} : (!torch.vtensor<[2,4,3],f32>) -> !torch.vtensor<[2,4,3],f32>
  %n = torch.aten.neg %s : !torch.vtensor<[2,4,3],f32> -> !torch.vtensor<[2,4,3],f32>
  return %h, %n : !torch.vtensor<[2,4,3],f32>, !torch.vtensor<[2,4,3],f32>
}

// -----

// The shard is this rank's own value (here a negation of it): the neighbour's elements exist only on
// the neighbour, so the halo stays.
// CHECK-LABEL: func.func @computed(
// CHECK:         "sp.halo"
func.func @computed(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32> {
  %s = "sp.shard_slice"(%x) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32>
  %n = torch.aten.neg %s : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  %h = "sp.halo"(%n) {dim = 1 : i64, width = 1 : i64, fill = 0.0 : f64, group = "sp"} : (!torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32>
  return %h : !torch.vtensor<[2,4],f32>
}

// -----

// Sharded along dim 0 but shifted along dim 1: the halo stays.
// CHECK-LABEL: func.func @other_dim(
// CHECK:         "sp.halo"
func.func @other_dim(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[2,8],f32> {
  %s = "sp.shard_slice"(%x) {dim = 0 : i64, group = "sp"} : (!torch.vtensor<[4,8],f32>) -> !torch.vtensor<[2,8],f32>
  %h = "sp.halo"(%s) {dim = 1 : i64, width = 1 : i64, fill = 0.0 : f64, group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32>
  return %h : !torch.vtensor<[2,8],f32>
}
