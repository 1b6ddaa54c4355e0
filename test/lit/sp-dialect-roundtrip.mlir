// Every sp op parses, verifies, prints, and re-parses to the same text. The second run also
// canonicalizes: every sp op is Pure, so unused ones are erased (and used ones are kept as they are).
// RUN: %autosp-opt %s | %autosp-opt --pass-pipeline='builtin.module(canonicalize)' | FileCheck %s

// CHECK-LABEL: func.func @attention
// CHECK-SAME:    (%[[Q:[^:]+]]: !torch.vtensor<[2,4,8,16],f32>, %[[K:[^:]+]]: !torch.vtensor<[2,2,8,16],f32>, %[[V:[^:]+]]: !torch.vtensor<[2,2,8,16],f32>)
// CHECK:         %[[A:[0-9]+]]:2 = "sp.attention"(%[[Q]], %[[K]], %[[V]]) {causal = true, kv_groups = 2 : i64, scale = 2.500000e-01 : f64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
// CHECK:         return %[[A]]#0, %[[A]]#1
func.func @attention(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>, %v: !torch.vtensor<[2,2,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) {
  %o, %lse = "sp.attention"(%q, %k, %v) {causal = true, scale = 0.25 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o, %lse : !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>
}

// A non-causal flag is an i1 zero: it must survive the round trip (falsy attributes are easy to drop).
// CHECK-LABEL: func.func @attention_noncausal
// CHECK:         "sp.attention"(%{{.+}}, %{{.+}}, %{{.+}}) {causal = false, kv_groups = 1 : i64, scale = 1.250000e-01 : f64, window = 0 : i64}
func.func @attention_noncausal(%q: !torch.vtensor<[1,2,4,8],f32>) -> !torch.vtensor<[1,2,4,8],f32> {
  %o, %lse = "sp.attention"(%q, %q, %q) {causal = false, scale = 0.125 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4,8],f32>) -> (!torch.vtensor<[1,2,4,8],f32>, !torch.vtensor<[1,2,4],f32>)
  return %o : !torch.vtensor<[1,2,4,8],f32>
}

// CHECK-LABEL: func.func @attention_grad
// CHECK-SAME:    (%[[DO:[^:]+]]: !torch.vtensor<[2,4,8,16],f32>, %[[Q:[^:]+]]: !torch.vtensor<[2,4,8,16],f32>, %[[K:[^:]+]]: !torch.vtensor<[2,2,8,16],f32>, %[[V:[^:]+]]: !torch.vtensor<[2,2,8,16],f32>, %[[O:[^:]+]]: !torch.vtensor<[2,4,8,16],f32>, %[[L:[^:]+]]: !torch.vtensor<[2,4,8],f32>)
// CHECK:         %[[G:[0-9]+]]:3 = "sp.attention_grad"(%[[DO]], %[[Q]], %[[K]], %[[V]], %[[O]], %[[L]]) {causal = true, kv_groups = 2 : i64, scale = 2.500000e-01 : f64, window = 0 : i64}
// CHECK-SAME:      -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>)
// CHECK:         return %[[G]]#0, %[[G]]#1, %[[G]]#2
func.func @attention_grad(%do: !torch.vtensor<[2,4,8,16],f32>, %q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>, %v: !torch.vtensor<[2,2,8,16],f32>, %o: !torch.vtensor<[2,4,8,16],f32>, %lse: !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>) {
  %dq, %dk, %dv = "sp.attention_grad"(%do, %q, %k, %v, %o, %lse) {causal = true, scale = 0.25 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>)
  return %dq, %dk, %dv : !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>
}

// CHECK-LABEL: func.func @collectives
// CHECK-SAME:    (%[[X:[^:]+]]: !torch.vtensor<[2,4,8,16],f32>
// CHECK:         %[[A2A:[0-9]+]] = "sp.all_to_all"(%[[X]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
// CHECK:         %[[AR:[0-9]+]] = "sp.all_reduce"(%[[A2A]]) {group = "world", op = "sum"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
// CHECK:         %[[AVG:[0-9]+]] = "sp.all_reduce"(%[[AR]]) {group = "dp", op = "avg"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
// CHECK:         %[[MAX:[0-9]+]] = "sp.all_reduce"(%[[AVG]]) {group = "sp", op = "max"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
// CHECK:         %[[AG:[0-9]+]] = "sp.all_gather"(%[[MAX]]) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,32,16],f32>
// CHECK:         %[[RS:[0-9]+]] = "sp.reduce_scatter"(%[[AG]]) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,2,32,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
// CHECK:         %[[SS:[0-9]+]] = "sp.shard_slice"(%[[RS]]) {dim = 3 : i64, group = "sp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,8],f32>
// CHECK:         return %[[SS]]
func.func @collectives(%x: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,2,16,8],f32> {
  %0 = "sp.all_to_all"(%x) {scatter_dim = 1 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %1 = "sp.all_reduce"(%0) {op = "sum", group = "world"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %2 = "sp.all_reduce"(%1) {op = "avg", group = "dp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %3 = "sp.all_reduce"(%2) {op = "max", group = "sp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %4 = "sp.all_gather"(%3) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,32,16],f32>
  %5 = "sp.reduce_scatter"(%4) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,2,32,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %6 = "sp.shard_slice"(%5) {dim = 3 : i64, group = "sp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,2,16,8],f32>
  return %6 : !torch.vtensor<[2,2,16,8],f32>
}

// CHECK-LABEL: func.func @halo
// CHECK:         "sp.halo"(%{{.+}}) {dim = 1 : i64, fill = -1.000000e+02 : f64, group = "sp", width = 1 : i64} : (!torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4],si64>
func.func @halo(%labels: !torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4],si64> {
  %0 = "sp.halo"(%labels) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4],si64>
  return %0 : !torch.vtensor<[2,4],si64>
}

// The verifiers only read shapes of static `!torch.vtensor`s: other operand types pass through.
// CHECK-LABEL: func.func @builtin_tensors
// CHECK:         "sp.all_to_all"(%{{.+}}) {gather_dim = 0 : i64, group = "sp", scatter_dim = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK:         "sp.shard_slice"(%{{.+}}) {dim = 0 : i64, group = "sp"} : (!torch.vtensor<*,f32>) -> !torch.vtensor<[2,8],f32>
func.func @builtin_tensors(%x: tensor<4x8xf32>, %u: !torch.vtensor<*,f32>) -> (tensor<8x4xf32>, !torch.vtensor<[2,8],f32>) {
  %0 = "sp.all_to_all"(%x) {scatter_dim = 1 : i64, gather_dim = 0 : i64, group = "sp"} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %1 = "sp.shard_slice"(%u) {dim = 0 : i64, group = "sp"} : (!torch.vtensor<*,f32>) -> !torch.vtensor<[2,8],f32>
  return %0, %1 : tensor<8x4xf32>, !torch.vtensor<[2,8],f32>
}

// CHECK-LABEL: func.func @unused_ops_are_erased
// CHECK-NEXT:    return
// CHECK-NEXT:  }
func.func @unused_ops_are_erased(%x: !torch.vtensor<[2,4,8,16],f32>, %lse: !torch.vtensor<[2,4,8],f32>, %labels: !torch.vtensor<[2,4],si64>) {
  %o, %l = "sp.attention"(%x, %x, %x) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  %dq, %dk, %dv = "sp.attention_grad"(%x, %x, %x, %x, %x, %lse) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>)
  %0 = "sp.all_to_all"(%x) {scatter_dim = 1 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %1 = "sp.all_reduce"(%x) {op = "sum", group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32>
  %2 = "sp.all_gather"(%x) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,16,16],f32>
  %3 = "sp.reduce_scatter"(%x) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,4,16],f32>
  %4 = "sp.shard_slice"(%x) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,4,16],f32>
  %5 = "sp.halo"(%labels) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4],si64>
  return
}
