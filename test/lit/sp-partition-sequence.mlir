// sp-partition-sequence{sp=2}: local (per-rank) types from the layouts of sp-propagate-sequence,
// and the collectives: token inputs sliced, Ulysses all-to-alls around attention, the label shift
// as sp.halo, the mean loss as a global token-weighted mean, partial values all-reduced.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1 attention=ulysses})' | FileCheck %s
// With data parallelism the weight gradients are reduced over the world group and averaged over dp.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2 dp=2})' | FileCheck %s --check-prefix=DP2
// attention=ring: q, k, v stay sequence-sharded (no all-to-all), K/V at KV-head width; the statistics
// are sequence-sharded too, and the backward reads them as they are. A step without attention keeps
// contiguous blocks.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1 attention=ring})' | FileCheck %s --check-prefix=RING
// attention=hybrid at sp=4: all-to-alls over the 2-rank ulysses groups split the heads (KV heads too),
// ring attention over the 2-rank ring groups on the head-split values, the output back by all-to-all.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=4 dp=1 attention=hybrid})' | FileCheck %s --check-prefix=HYBRID
// On one rank every collective is an identity and is folded away (sp.halo stays: it shifts).
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=1 dp=1})' | FileCheck %s --check-prefix=ONE

// The func keeps its global signature; each token input is sliced once, at the top of the body,
// and every use reads the local block. Shape lists of reshapes are rewritten to local extents.
// CHECK-LABEL: module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}}
// CHECK:       func.func @tokens(%arg0: !torch.vtensor<[32,16],f32>, %arg1: !torch.vtensor<[16,8],f32>, %arg2: !torch.vtensor<[2,8],si64>, %arg3: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[32,16],f32>, !torch.vtensor<[16,8],f32>)
// CHECK-NEXT:    %[[LAB:[0-9]+]] = "sp.shard_slice"(%arg3) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64>
// CHECK-NEXT:    %[[IDS:[0-9]+]] = "sp.shard_slice"(%arg2) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64>
// CHECK:         %[[X:[0-9]+]] = torch.aten.embedding %arg0, %[[IDS]], {{.*}} -> !torch.vtensor<[2,4,16],f32>
// CHECK:         %[[SHAPE:[0-9]+]] = torch.prim.ListConstruct %int8, %int16{{.*}} : (!torch.int, !torch.int) -> !torch.list<int>
// CHECK:         %[[TOK:[0-9]+]] = torch.aten.view %[[X]], %[[SHAPE]] {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK:         %[[Y:[0-9]+]] = torch.aten.mm %[[TOK]], %arg1 {{.*}} -> !torch.vtensor<[8,8],f32>
// CHECK:         %[[TT:[0-9]+]] = torch.aten.t %[[TOK]] {{.*}} -> !torch.vtensor<[16,8],f32>
// CHECK:         %[[GW:[0-9]+]] = torch.aten.mm %[[TT]], %[[Y]] {sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[16,8],f32>
// CHECK:         %[[GE:[0-9]+]] = torch.aten.embedding_dense_backward %[[X]], %[[LAB]], {{.*}} -> !torch.vtensor<[32,16],f32>
// Partial results (weight gradients) are summed over the sp group before they are returned.
// CHECK-NEXT:    %[[GER:[0-9]+]] = "sp.all_reduce"(%[[GE]]) {group = "sp", op = "sum"} : (!torch.vtensor<[32,16],f32>) -> !torch.vtensor<[32,16],f32>
// CHECK-NEXT:    %[[GWR:[0-9]+]] = "sp.all_reduce"(%[[GW]]) {group = "sp", op = "sum"} : (!torch.vtensor<[16,8],f32>) -> !torch.vtensor<[16,8],f32>
// CHECK-NEXT:    return %[[GER]], %[[GWR]] : !torch.vtensor<[32,16],f32>, !torch.vtensor<[16,8],f32>
// DP2-LABEL:   module attributes {sp.mesh = {dp = 2 : i64, sp = 2 : i64}}
// DP2:           %[[GE:[0-9]+]] = torch.aten.embedding_dense_backward
// DP2-NEXT:      %[[SUM:[0-9]+]] = "sp.all_reduce"(%[[GE]]) {group = "world", op = "sum"} : (!torch.vtensor<[32,16],f32>) -> !torch.vtensor<[32,16],f32>
// DP2-NEXT:      %[[DP:.+]] = torch.constant.float 2.000000e+00
// DP2-NEXT:      %[[AVG:[0-9]+]] = torch.aten.div.Scalar %[[SUM]], %[[DP]] : !torch.vtensor<[32,16],f32>, !torch.float -> !torch.vtensor<[32,16],f32>
// DP2-NOT:       group = "sp"
// DP2:           "sp.all_reduce"(%{{[0-9]+}}) {group = "world", op = "sum"} : (!torch.vtensor<[16,8],f32>)
// DP2-NEXT:      torch.constant.float 2.000000e+00
// DP2-NEXT:      torch.aten.div.Scalar
// DP2-NOT:       group = "sp"
// DP2:           return %[[AVG]], %{{[0-9]+}}
func.func @tokens(%emb: !torch.vtensor<[32,16],f32>, %w: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[32,16],f32>, !torch.vtensor<[16,8],f32>) attributes {sp.args = ["param:emb", "param:w", "input:input_ids", "input:labels"], sp.results = ["grad:emb", "grad:w"]} {
  %int-1 = torch.constant.int -1
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %false = torch.constant.bool false
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %y = torch.aten.mm %tok, %w : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %tt = torch.aten.t %tok : !torch.vtensor<[16,16],f32> -> !torch.vtensor<[16,16],f32>
  %gw = torch.aten.mm %tt, %y : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %gemb = torch.aten.embedding_dense_backward %x, %labels, %int32, %int-1, %false : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.int, !torch.bool -> !torch.vtensor<[32,16],f32>
  return %gemb, %gw : !torch.vtensor<[32,16],f32>, !torch.vtensor<[16,8],f32>
}
// -----
// Ulysses: q, k, v go from sequence- to head-sharded (scatter heads, gather sequence); with
// 2 KV heads on 2 ranks K/V are exchanged at KV-head width and kv_groups stays 2. The output goes
// back to sequence-sharded; the statistics stay head-sharded.
// CHECK-LABEL: func.func @attention
// CHECK:         %[[Q:[0-9]+]] = torch.aten.transpose.int {{.*}} -> !torch.vtensor<[2,4,4,4],f32>
// CHECK:         %[[K:[0-9]+]] = torch.aten.transpose.int {{.*}} -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:         %[[V:[0-9]+]] = torch.aten.transpose.int {{.*}} -> !torch.vtensor<[2,2,4,4],f32>
// CHECK-NEXT:    %[[QH:[0-9]+]] = "sp.all_to_all"(%[[Q]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,4,4,4],f32>) -> !torch.vtensor<[2,2,8,4],f32>
// CHECK-NEXT:    %[[KH:[0-9]+]] = "sp.all_to_all"(%[[K]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,2,4,4],f32>) -> !torch.vtensor<[2,1,8,4],f32>
// CHECK-NEXT:    %[[VH:[0-9]+]] = "sp.all_to_all"(%[[V]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,2,4,4],f32>) -> !torch.vtensor<[2,1,8,4],f32>
// CHECK-NEXT:    %[[A:[0-9]+]]:2 = "sp.attention"(%[[QH]], %[[KH]], %[[VH]]) {causal = true, kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64} : (!torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>) -> (!torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8],f32>)
// CHECK-NEXT:    %[[O:[0-9]+]] = "sp.all_to_all"(%[[A]]#0) {gather_dim = 1 : i64, group = "sp", scatter_dim = 2 : i64} : (!torch.vtensor<[2,2,8,4],f32>) -> !torch.vtensor<[2,4,4,4],f32>
// CHECK-NEXT:    %[[S:[0-9]+]] = torch.aten.sum %[[O]], %none {sp.layout = ["partial"]}
// CHECK-NEXT:    %[[R:[0-9]+]] = "sp.all_reduce"(%[[S]]) {group = "sp", op = "sum"}
// CHECK-NEXT:    return %[[R]]
// Causal ring attention on a sequence of 2 x sp chunks puts it in zigzag order (runtime/collectives.py).
// RING:        module attributes {sp.attention_scheme = {{.*}}scheme = "ring 2"}, sp.mesh = {dp = 1 : i64, order = "zigzag", sp = 2 : i64}}
// RING-LABEL:  func.func @attention
// RING-NOT:      sp.all_to_all
// RING:          %[[A:[0-9]+]]:2 = "sp.ring_attention"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {causal = true, group = "sp", kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64} : (!torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[2,2,4,4],f32>) -> (!torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,4,4],f32>)
// RING-NEXT:     torch.aten.sum %[[A]]#0, %none
// HYBRID:        module attributes {sp.attention_scheme = {bytes = {"hybrid 2x2" = {{.*}} : f64, "ring 4" = {{.*}} : f64, "ulysses 4" = {{.*}} : f64}, scheme = "hybrid 2x2"}, sp.mesh = {dp = 1 : i64, order = "zigzag", sp = 4 : i64, ulysses = 2 : i64}}
// HYBRID-LABEL:  func.func @attention
// HYBRID:          %[[QH:[0-9]+]] = "sp.all_to_all"(%{{[0-9]+}}) {gather_dim = 2 : i64, group = "ulysses", scatter_dim = 1 : i64} : (!torch.vtensor<[2,4,2,4],f32>) -> !torch.vtensor<[2,2,4,4],f32>
// HYBRID-NEXT:     %[[KH:[0-9]+]] = "sp.all_to_all"(%{{[0-9]+}}) {gather_dim = 2 : i64, group = "ulysses", scatter_dim = 1 : i64} : (!torch.vtensor<[2,2,2,4],f32>) -> !torch.vtensor<[2,1,4,4],f32>
// HYBRID-NEXT:     %[[VH:[0-9]+]] = "sp.all_to_all"(%{{[0-9]+}}) {gather_dim = 2 : i64, group = "ulysses", scatter_dim = 1 : i64}
// HYBRID-NEXT:     %[[A:[0-9]+]]:2 = "sp.ring_attention"(%[[QH]], %[[KH]], %[[VH]]) {causal = true, group = "ring", kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64} : {{.*}} -> (!torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[2,2,4],f32>)
// HYBRID-NEXT:     "sp.all_to_all"(%[[A]]#0) {gather_dim = 1 : i64, group = "ulysses", scatter_dim = 2 : i64} : (!torch.vtensor<[2,2,4,4],f32>) -> !torch.vtensor<[2,4,2,4],f32>
// ONE-LABEL:   func.func @attention
// ONE-NOT:       sp.all_to_all
// ONE:           %[[A:[0-9]+]]:2 = "sp.attention"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) {{.*}} -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
// ONE-NEXT:      %[[S:[0-9]+]] = torch.aten.sum %[[A]]#0, %none
// ONE-NEXT:      return %[[S]]
func.func @attention(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,8],f32>, %wv: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:emb", "param:wk", "param:wv", "input:input_ids"], sp.results = ["loss"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int2, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %vf = torch.aten.mm %tok, %wv : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %v4 = torch.aten.view %vf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %v = torch.aten.transpose.int %v4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %o, %lse = "sp.attention"(%q, %k, %v) {causal = true, scale = 0.5 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %s = torch.aten.sum %o, %none : !torch.vtensor<[2,4,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// Packed documents: each query's position in its document goes with the query rows. Ulysses over
// all ranks reads the whole input (each rank attends the whole sequence of its heads); the ring
// keeps this rank's rows, which its sequence shard holds; hybrid gathers them over its ulysses group.
// CHECK-LABEL: func.func @documents
// CHECK-NOT:     sp.all_gather
// CHECK:         "sp.attention"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %arg4) {causal = true, kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64} : (!torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,8],si64>)
// RING-LABEL:  func.func @documents
// RING:          %[[DOC:[0-9]+]] = "sp.shard_slice"(%arg4) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4],si64>
// RING-NOT:      sp.all_gather
// RING:          "sp.ring_attention"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[DOC]]) {{.*}} : (!torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[2,4],si64>)
// HYBRID-LABEL:  func.func @documents
// HYBRID:          %[[DOC:[0-9]+]] = "sp.shard_slice"(%arg4) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,2],si64>
// HYBRID-NEXT:     %[[D:[0-9]+]] = "sp.all_gather"(%[[DOC]]) {dim = 1 : i64, group = "ulysses"} : (!torch.vtensor<[2,2],si64>) -> !torch.vtensor<[2,4],si64>
// HYBRID:          "sp.ring_attention"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %[[D]]) {causal = true, group = "ring", {{.*}} : (!torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[2,1,4,4],f32>, !torch.vtensor<[2,1,4,4],f32>, !torch.vtensor<[2,4],si64>)
// ONE-LABEL:   func.func @documents
// ONE-NOT:       sp.all_gather
// ONE:           "sp.attention"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %arg4)
func.func @documents(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,8],f32>, %wv: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>, %doc: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:emb", "param:wk", "param:wv", "input:input_ids", "input:doc_pos"], sp.results = ["loss"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int2, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %vf = torch.aten.mm %tok, %wv : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %v4 = torch.aten.view %vf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %v = torch.aten.transpose.int %v4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %o, %lse = "sp.attention"(%q, %k, %v, %doc) {causal = true, scale = 0.5 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %s = torch.aten.sum %o, %none : !torch.vtensor<[2,4,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// The backward re-shards dout, q, k, v the same way (each once: the forward's head-sharded q/k
// are reused, and `out` - through its detach - is the forward's head-sharded output), reads the
// forward's head-sharded statistics, and sends dq, dk, dv back to sequence-sharded.
// CHECK-LABEL: func.func @attention_grad
// CHECK:         %[[QH:[0-9]+]] = "sp.all_to_all"(%[[Q:[0-9]+]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,4,4,4],f32>)
// CHECK-NEXT:    %[[KH:[0-9]+]] = "sp.all_to_all"(%{{[0-9]+}}) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,2,4,4],f32>)
// CHECK-NEXT:    %[[A:[0-9]+]]:2 = "sp.attention"(%[[QH]], %[[KH]], %[[KH]])
// CHECK-NEXT:    "sp.all_to_all"(%[[A]]#0) {gather_dim = 1 : i64, group = "sp", scatter_dim = 2 : i64}
// CHECK-NEXT:    torch.aten.detach
// CHECK-NEXT:    %[[DO:[0-9]+]] = torch.aten.neg %[[Q]]
// CHECK-NEXT:    %[[DOH:[0-9]+]] = "sp.all_to_all"(%[[DO]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,4,4,4],f32>) -> !torch.vtensor<[2,2,8,4],f32>
// CHECK-NEXT:    %[[G:[0-9]+]]:3 = "sp.attention_grad"(%[[DOH]], %[[QH]], %[[KH]], %[[KH]], %[[A]]#0, %[[A]]#1) {causal = true, kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// CHECK-SAME:      -> (!torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>)
// CHECK-NEXT:    "sp.all_to_all"(%[[G]]#0) {gather_dim = 1 : i64, group = "sp", scatter_dim = 2 : i64} : (!torch.vtensor<[2,2,8,4],f32>) -> !torch.vtensor<[2,4,4,4],f32>
// CHECK-NEXT:    %[[DK:[0-9]+]] = "sp.all_to_all"(%[[G]]#1) {gather_dim = 1 : i64, group = "sp", scatter_dim = 2 : i64} : (!torch.vtensor<[2,1,8,4],f32>) -> !torch.vtensor<[2,2,4,4],f32>
// CHECK-NEXT:    "sp.all_to_all"(%[[G]]#2) {gather_dim = 1 : i64, group = "sp", scatter_dim = 2 : i64} : (!torch.vtensor<[2,1,8,4],f32>) -> !torch.vtensor<[2,2,4,4],f32>
// CHECK-NEXT:    torch.aten.sum %[[DK]], %none
// CHECK-COUNT-1: "sp.all_reduce"
// CHECK-NOT:     "sp.all_to_all"
// RING-LABEL:  func.func @attention_grad
// RING:          %[[A:[0-9]+]]:2 = "sp.ring_attention"(%[[Q:[0-9]+]], %[[K:[0-9]+]], %[[K]])
// RING-NEXT:     %[[O:[0-9]+]] = torch.aten.detach %[[A]]#0 {sp.layout = ["seq<2>"]} : !torch.vtensor<[2,4,4,4],f32>
// RING-NEXT:     %[[DO:[0-9]+]] = torch.aten.neg %[[Q]]
// RING-NEXT:     "sp.ring_attention_grad"(%[[DO]], %[[Q]], %[[K]], %[[K]], %[[O]], %[[A]]#1) {causal = true, group = "sp", kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// RING-SAME:       -> (!torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,2,4,4],f32>, !torch.vtensor<[2,2,4,4],f32>)
// RING-NOT:      "sp.all_to_all"
func.func @attention_grad(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:emb", "param:wk", "input:input_ids"], sp.results = ["loss"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int2, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %o, %lse = "sp.attention"(%q, %k, %k) {causal = true, scale = 0.5 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %od = torch.aten.detach %o : !torch.vtensor<[2,4,8,4],f32> -> !torch.vtensor<[2,4,8,4],f32>
  %dout = torch.aten.neg %q : !torch.vtensor<[2,4,8,4],f32> -> !torch.vtensor<[2,4,8,4],f32>
  %g:3 = "sp.attention_grad"(%dout, %q, %k, %k, %od, %lse) {causal = true, scale = 0.5 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>)
  %s = torch.aten.sum %g#1, %none : !torch.vtensor<[2,2,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// 1 KV head cannot be split over 2 ranks: it is repeated twice (the least number of heads 2 ranks
// divide), so the all-to-all sends each rank one copy, the KV head its 2 query heads read
// (kv_groups becomes 2), never the whole K/V. In the backward the copies' gradients come back the
// same way and are summed into their KV head.
// CHECK-LABEL: func.func @repeat_kv
// CHECK:         %[[QH:[0-9]+]] = "sp.all_to_all"(%{{[0-9]+}}) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,4,4,4],f32>) -> !torch.vtensor<[2,2,8,4],f32>
// CHECK:         %[[REP:[0-9]+]] = torch.aten.repeat_interleave.self_int %{{[0-9]+}}, %int2{{[_0-9]*}}, %int1{{[_0-9]*}}, %none{{[_0-9]*}} : !torch.vtensor<[2,1,4,4],f32>, !torch.int, !torch.int, !torch.none -> !torch.vtensor<[2,2,4,4],f32>
// CHECK-NEXT:    %[[KH:[0-9]+]] = "sp.all_to_all"(%[[REP]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,2,4,4],f32>) -> !torch.vtensor<[2,1,8,4],f32>
// CHECK-NEXT:    %[[A:[0-9]+]]:2 = "sp.attention"(%[[QH]], %[[KH]], %[[KH]]) {causal = true, kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// CHECK-NOT:     sp.all_gather
// CHECK:         %[[G:[0-9]+]]:3 = "sp.attention_grad"(%{{[0-9]+}}, %[[QH]], %[[KH]], %[[KH]], %[[A]]#0, %[[A]]#1) {causal = true, kv_groups = 2 : i64, scale = 5.000000e-01 : f64, window = 0 : i64}
// CHECK:         %[[DK:[0-9]+]] = "sp.all_to_all"(%[[G]]#1) {{.*}} : (!torch.vtensor<[2,1,8,4],f32>) -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:         %[[DK5:[0-9]+]] = torch.aten.view %[[DK]], %{{[0-9]+}} : {{.*}} -> !torch.vtensor<[2,1,2,4,4],f32>
// CHECK:         torch.aten.sum.dim_IntList %[[DK5]], {{.*}} -> !torch.vtensor<[2,1,4,4],f32>
// CHECK:         %[[DV:[0-9]+]] = "sp.all_to_all"(%[[G]]#2) {{.*}} : (!torch.vtensor<[2,1,8,4],f32>) -> !torch.vtensor<[2,2,4,4],f32>
// CHECK:         %[[DV5:[0-9]+]] = torch.aten.view %[[DV]], %{{[0-9]+}} : {{.*}} -> !torch.vtensor<[2,1,2,4,4],f32>
// CHECK:         %[[DVS:[0-9]+]] = torch.aten.sum.dim_IntList %[[DV5]], {{.*}} -> !torch.vtensor<[2,1,4,4],f32>
// CHECK:         torch.aten.sum %[[DVS]], %none {sp.layout = ["partial"]}
func.func @repeat_kv(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,4],f32>, %ids: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:emb", "param:wk", "input:input_ids"], sp.results = ["loss"]} {
  %int-1 = torch.constant.int -1
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int1, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[16,4],f32>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,4],f32>, !torch.list<int> -> !torch.vtensor<[2,8,1,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,1,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,1,8,4],f32>
  %o, %lse = "sp.attention"(%q, %k, %k) {causal = true, scale = 0.5 : f64, kv_groups = 4 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %dout = torch.aten.neg %q : !torch.vtensor<[2,4,8,4],f32> -> !torch.vtensor<[2,4,8,4],f32>
  %g:3 = "sp.attention_grad"(%dout, %q, %k, %k, %o, %lse) {causal = true, scale = 0.5 : f64, kv_groups = 4 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>, !torch.vtensor<[2,1,8,4],f32>)
  %s = torch.aten.sum %g#2, %none : !torch.vtensor<[2,1,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// Label shift: the pad + slice pair becomes one sp.halo on the local labels (each rank receives the
// next rank's first label; the last rank fills with the pad value). The mean loss becomes a local
// sum (reduction 2) and a local token count, both summed over the group, then divided; the loss
// backward reads the global count.
// CHECK-LABEL: func.func @loss
// CHECK-NEXT:    %[[LAB:[0-9]+]] = "sp.shard_slice"(%arg2) {dim = 1 : i64, group = "sp"}
// CHECK-NOT:     torch.aten.constant_pad_nd
// CHECK:         %[[SH:[0-9]+]] = "sp.halo"(%[[LAB]]) {dim = 1 : i64, fill = -1.000000e+02 : f64, group = "sp", width = 1 : i64} : (!torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4],si64>
// CHECK-NOT:     torch.aten.slice.Tensor
// ONE-LABEL:   func.func @loss
// ONE-NOT:       sp.shard_slice
// ONE-NOT:       sp.all_reduce
// ONE:           "sp.halo"(%arg2) {dim = 1 : i64, fill = -1.000000e+02 : f64, group = "sp", width = 1 : i64} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64>
// ONE-NOT:       sp.all_reduce
// ONE:           return
// CHECK:         %[[TGT:[0-9]+]] = torch.aten.view %[[SH]], {{.*}} -> !torch.vtensor<[8],si64>
// CHECK:         %[[LP:[0-9]+]] = torch.aten._log_softmax {{.*}} -> !torch.vtensor<[8,32],f32>
// CHECK:         %[[TWO:.+]] = torch.constant.int 2
// CHECK-NEXT:    %[[TOT:.+]], %[[CNT:.+]] = torch.aten.nll_loss_forward %[[LP]], %[[TGT]], %none, %[[TWO]], %int-100 : {{.*}} -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
// CHECK-NEXT:    %[[GTOT:[0-9]+]] = "sp.all_reduce"(%[[TOT]]) {group = "sp", op = "sum"} : (!torch.vtensor<[],f32>) -> !torch.vtensor<[],f32>
// CHECK-NEXT:    %[[GCNT:[0-9]+]] = "sp.all_reduce"(%[[CNT]]) {group = "sp", op = "sum"} : (!torch.vtensor<[],f32>) -> !torch.vtensor<[],f32>
// CHECK-NEXT:    %[[LOSS:[0-9]+]] = torch.aten.div.Tensor %[[GTOT]], %[[GCNT]] : !torch.vtensor<[],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[],f32>
// CHECK:         torch.aten.nll_loss_backward %{{[0-9]+}}, %[[LP]], %[[TGT]], %none, %int1, %int-100, %[[GCNT]] {{.*}} -> !torch.vtensor<[8,32],f32>
// CHECK:         %[[GW:[0-9]+]] = torch.aten.mm {{.*}}{sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[32,32],f32>
// CHECK-NEXT:    %[[GWR:[0-9]+]] = "sp.all_reduce"(%[[GW]])
// CHECK-NEXT:    return %[[LOSS]], %[[GWR]]
func.func @loss(%emb: !torch.vtensor<[32,32],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>) attributes {sp.args = ["param:emb", "input:input_ids", "input:labels"], sp.results = ["loss", "grad:emb"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -100
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %none = torch.constant.none
  %fill = torch.constant.float -1.000000e+02
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  %shifted = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,9],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %shifted, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,32],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,32],f32>
  %l2 = torch.prim.ListConstruct %int16, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
  %logits = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[16,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[16,32],f32>
  %loss, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %one = torch.aten.ones_like %loss, %none, %none, %none, %false, %none : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  %gl = torch.aten.nll_loss_backward %one, %lp, %tgt, %none, %int1, %int-100, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[16,32],f32>
  %gx = torch.aten._log_softmax_backward_data %gl, %lp, %int1, %int6 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16,32],f32>, !torch.int, !torch.int -> !torch.vtensor<[16,32],f32>
  %l3 = torch.prim.ListConstruct %int0, %int16, %int32 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %gx3 = torch.aten.view %gx, %l2 : !torch.vtensor<[16,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %gemb = torch.aten.mm %gx3, %emb : !torch.vtensor<[16,32],f32>, !torch.vtensor<[32,32],f32> -> !torch.vtensor<[16,32],f32>
  %tgx = torch.aten.t %gx : !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,16],f32>
  %gw = torch.aten.mm %tgx, %logits : !torch.vtensor<[32,16],f32>, !torch.vtensor<[16,32],f32> -> !torch.vtensor<[32,32],f32>
  return %loss, %gw : !torch.vtensor<[],f32>, !torch.vtensor<[32,32],f32>
}
// -----
// A sum loss is the global sum (no division); per-token losses (reduction 0) stay local.
// CHECK-LABEL: func.func @loss_sum_and_none
// CHECK:         %[[TOT:.+]], %{{.+}} = torch.aten.nll_loss_forward {{.*}} -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
// CHECK-NEXT:    %[[GTOT:[0-9]+]] = "sp.all_reduce"(%[[TOT]])
// CHECK-NEXT:    "sp.all_reduce"
// CHECK-NOT:     torch.aten.div.Tensor
// CHECK:         %[[EACH:.+]], %{{.+}} = torch.aten.nll_loss_forward %{{[0-9]+}}, %{{[0-9]+}}, %none, %int0, %int-100 {sp.layout = ["seq<0>", "rep"]} : {{.*}} -> !torch.vtensor<[8],f32>, !torch.vtensor<[],f32>
// CHECK-NEXT:    torch.aten.sum %[[EACH]]
// CHECK-NEXT:    "sp.all_reduce"
// CHECK-NEXT:    return %[[GTOT]],
func.func @loss_sum_and_none(%lpw: !torch.vtensor<[32,32],f32>, %ids: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[],f32>) attributes {sp.args = ["param:w", "input:input_ids"], sp.results = ["loss", "sum_of_each"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %lpw, %ids, %int-1, %false, %false : !torch.vtensor<[32,32],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,32],f32>
  %l2 = torch.prim.ListConstruct %int16, %int32 : (!torch.int, !torch.int) -> !torch.list<int>
  %lp = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,32],f32>, !torch.list<int> -> !torch.vtensor<[16,32],f32>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %ids, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %total, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int2, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %each, %tw0 = torch.aten.nll_loss_forward %lp, %tgt, %none, %int0, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[16],f32>, !torch.vtensor<[],f32>
  %s = torch.aten.sum %each, %none : !torch.vtensor<[16],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %total, %s : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
}
// -----
// Demands: a replicated [S, E] table meeting sequence-sharded activations is sliced once, right
// after its definition, and shared by its users; a partial sum read by a non-linear op is
// all-reduced right after its definition. A mean over the sequence is the sum of local means / P.
// A full slice of the sequence dim stays a full (open-ended) slice of the local block.
// CHECK-LABEL: func.func @demands
// CHECK-NEXT:    %[[POS:[0-9]+]] = "sp.shard_slice"(%arg2) {dim = 0 : i64, group = "sp"} : (!torch.vtensor<[8,16],f32>) -> !torch.vtensor<[4,16],f32>
// CHECK-NEXT:    "sp.shard_slice"(%arg0) {dim = 1 : i64, group = "sp"}
// CHECK-NOT:     "sp.shard_slice"
// CHECK:         %[[A:[0-9]+]] = torch.aten.add.Tensor %{{[0-9]+}}, %[[POS]], %int1 {sp.layout = ["seq<1>"]} : !torch.vtensor<[2,4,16],f32>, !torch.vtensor<[4,16],f32>, !torch.int -> !torch.vtensor<[2,4,16],f32>
// CHECK-NEXT:    torch.aten.mul.Tensor %[[POS]], %[[A]]
// CHECK:         %[[END:.+]] = torch.constant.int 9223372036854775807
// CHECK-NEXT:    %[[FULL:[0-9]+]] = torch.aten.slice.Tensor %{{[0-9]+}}, %int1, %int0, %[[END]], %int1 {{.*}} -> !torch.vtensor<[2,4,16],f32>
// CHECK:         %[[S:[0-9]+]] = torch.aten.sum.dim_IntList %[[FULL]], {{.*}}{sp.layout = ["partial"]}
// CHECK-NEXT:    %[[SR:[0-9]+]] = "sp.all_reduce"(%[[S]]) {group = "sp", op = "sum"}
// CHECK-NEXT:    torch.aten.rsqrt %[[SR]] {sp.layout = ["rep"]}
// CHECK-NOT:     sp.demand
// CHECK:         %[[M:[0-9]+]] = torch.aten.mean.dim %[[FULL]], {{.*}}{sp.layout = ["partial"]} : {{.*}} -> !torch.vtensor<[2,16],f32>
// CHECK-NEXT:    %[[P:.+]] = torch.constant.float 2.000000e+00
// CHECK-NEXT:    %[[MS:[0-9]+]] = torch.aten.div.Scalar %[[M]], %[[P]]
// CHECK-NEXT:    %[[MR:[0-9]+]] = "sp.all_reduce"(%[[MS]])
func.func @demands(%ids: !torch.vtensor<[2,8],si64>, %emb: !torch.vtensor<[32,16],f32>, %pos: !torch.vtensor<[8,16],f32>) -> (!torch.vtensor<[16],f32>, !torch.vtensor<[2,16],f32>, !torch.vtensor<[16],f32>) attributes {sp.args = ["input:input_ids", "param:emb", "buffer:pos"], sp.results = ["r", "m", "s"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int8 = torch.constant.int 8
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %a = torch.aten.add.Tensor %x, %pos, %int1 : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[8,16],f32>, !torch.int -> !torch.vtensor<[2,8,16],f32>
  %b = torch.aten.mul.Tensor %pos, %a : !torch.vtensor<[8,16],f32>, !torch.vtensor<[2,8,16],f32> -> !torch.vtensor<[2,8,16],f32>
  %full = torch.aten.slice.Tensor %b, %int1, %int0, %int8, %int1 : !torch.vtensor<[2,8,16],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8,16],f32>
  %dims = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %s = torch.aten.sum.dim_IntList %full, %dims, %false, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[16],f32>
  %r = torch.aten.rsqrt %s : !torch.vtensor<[16],f32> -> !torch.vtensor<[16],f32>
  %seqdim = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %m = torch.aten.mean.dim %full, %seqdim, %false, %none : !torch.vtensor<[2,8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[2,16],f32>
  return %r, %m, %s : !torch.vtensor<[16],f32>, !torch.vtensor<[2,16],f32>, !torch.vtensor<[16],f32>
}
