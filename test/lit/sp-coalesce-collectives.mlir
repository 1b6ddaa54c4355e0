// sp-coalesce-collectives: a run of adjacent collectives becomes one collective per kind, round and
// bucket. q and k (different head counts) are re-sharded as one packed tensor along the scatter dim;
// dq and dk (GQA: different head counts at the gather dim) along the gather dim, each result copied
// out of the peers' pieces. The sp-sum all-reduces of three gradients are one flat all-reduce; the
// dp averages read their results, so they come a round later, packed again.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-coalesce-collectives)' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-coalesce-collectives{bucket=64})' | FileCheck %s --check-prefix=BUCKET
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-coalesce-collectives{bucket=0})' 2>&1 | FileCheck %s --check-prefix=ZERO

// CHECK-LABEL: func.func @backward(
// CHECK:         %[[Q:.*]] = torch.aten.view %arg3, %{{.*}} -> !torch.vtensor<[2,2,2,8,16],f32>
// CHECK:         %[[K:.*]] = torch.aten.view %arg4, %{{.*}} -> !torch.vtensor<[2,2,1,8,16],f32>
// CHECK:         %[[QK:.*]] = torch.prim.ListConstruct %[[Q]], %[[K]]
// CHECK:         %[[CAT:.*]] = torch.aten.cat %[[QK]], %int2{{.*}} -> !torch.vtensor<[2,2,3,8,16],f32>
// CHECK:         %[[FLAT:.*]] = torch.aten.view %[[CAT]], %{{.*}} -> !torch.vtensor<[2,6,8,16],f32>
// CHECK:         %[[MOVED:.*]] = "sp.all_to_all"(%[[FLAT]]) {gather_dim = 2 : i64, group = "sp", scatter_dim = 1 : i64} : (!torch.vtensor<[2,6,8,16],f32>) -> !torch.vtensor<[2,3,16,16],f32>
// CHECK:         %[[PARTS:.*]] = torch.aten.split_with_sizes %[[MOVED]], %{{.*}}, %int1{{.*}} -> !torch.list<vtensor>
// CHECK:         %[[QKO:.*]]:2 = torch.prim.ListUnpack %[[PARTS]] : !torch.list<vtensor> -> !torch.vtensor<[2,2,16,16],f32>, !torch.vtensor<[2,1,16,16],f32>
// CHECK:         %[[NEG:.*]] = torch.aten.neg %[[QKO]]#0
// CHECK:         %[[DQDK:.*]] = torch.prim.ListConstruct %arg5, %arg6
// CHECK:         %[[DCAT:.*]] = torch.aten.cat %[[DQDK]], %int1{{.*}} -> !torch.vtensor<[2,3,16,16],f32>
// CHECK:         %[[DMOVED:.*]] = "sp.all_to_all"(%[[DCAT]]) {gather_dim = 1 : i64, group = "sp", scatter_dim = 2 : i64} : (!torch.vtensor<[2,3,16,16],f32>) -> !torch.vtensor<[2,6,8,16],f32>
// CHECK:         %[[PEERS:.*]] = torch.aten.view %[[DMOVED]], %{{.*}} -> !torch.vtensor<[2,2,3,8,16],f32>
// CHECK:         %[[DPARTS:.*]] = torch.aten.split_with_sizes %[[PEERS]], %{{.*}}, %int2{{.*}} -> !torch.list<vtensor>
// CHECK:         %[[D:.*]]:2 = torch.prim.ListUnpack %[[DPARTS]] : !torch.list<vtensor> -> !torch.vtensor<[2,2,2,8,16],f32>, !torch.vtensor<[2,2,1,8,16],f32>
// CHECK:         %[[DQ:.*]] = torch.aten.reshape %[[D]]#0, %{{.*}} -> !torch.vtensor<[2,4,8,16],f32>
// CHECK:         %[[DK:.*]] = torch.aten.reshape %[[D]]#1, %{{.*}} -> !torch.vtensor<[2,2,8,16],f32>
// CHECK:         %[[A:.*]] = torch.aten.view %arg0, %{{.*}} -> !torch.vtensor<[16],f32>
// CHECK:         %[[C:.*]] = torch.aten.view %arg2, %{{.*}} -> !torch.vtensor<[6],f32>
// CHECK:         %[[ABC:.*]] = torch.prim.ListConstruct %[[A]], %arg1, %[[C]]
// CHECK:         %[[G:.*]] = torch.aten.cat %[[ABC]], %int0{{.*}} -> !torch.vtensor<[26],f32>
// CHECK:         %[[SUM:.*]] = "sp.all_reduce"(%[[G]]) {group = "sp", op = "sum"} : (!torch.vtensor<[26],f32>) -> !torch.vtensor<[26],f32>
// CHECK:         %[[GP:.*]]:3 = torch.prim.ListUnpack %{{.*}} -> !torch.vtensor<[16],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[6],f32>
// CHECK:         %[[SA:.*]] = torch.aten.view %[[GP]]#0, %{{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK:         %[[SC:.*]] = torch.aten.view %[[GP]]#2, %{{.*}} -> !torch.vtensor<[2,3],f32>
// CHECK:         %[[SA1:.*]] = torch.aten.view %[[SA]], %{{.*}} -> !torch.vtensor<[16],f32>
// CHECK:         %[[AB:.*]] = torch.prim.ListConstruct %[[SA1]], %[[GP]]#1
// CHECK:         %[[AVG:.*]] = "sp.all_reduce"(%{{.*}}) {group = "dp", op = "avg"} : (!torch.vtensor<[20],f32>) -> !torch.vtensor<[20],f32>
// CHECK:         %[[AP:.*]]:2 = torch.prim.ListUnpack %{{.*}} -> !torch.vtensor<[16],f32>, !torch.vtensor<[4],f32>
// CHECK:         %[[RA:.*]] = torch.aten.view %[[AP]]#0, %{{.*}} -> !torch.vtensor<[4,4],f32>
// CHECK-NOT:     sp.all_reduce
// CHECK:         return %[[RA]], %[[AP]]#1, %[[SC]], %[[NEG]], %[[QKO]]#1, %[[DQ]], %[[DK]]

// A 64-byte bucket: %a (64 B) fills one alone and stays as it was; %b and %c (16 + 24 B) share the next.
// BUCKET-LABEL: func.func @backward(
// BUCKET:         "sp.all_reduce"(%arg0) {group = "sp", op = "sum"} : (!torch.vtensor<[4,4],f32>)
// BUCKET:         "sp.all_reduce"(%{{.*}}) {group = "sp", op = "sum"} : (!torch.vtensor<[10],f32>)
// BUCKET:         "sp.all_reduce"(%{{.*}}) {group = "dp", op = "avg"} : (!torch.vtensor<[4,4],f32>)
// BUCKET-NOT:     "sp.all_reduce"(%{{.*}}) {group = "dp", op = "avg"} : (!torch.vtensor<[20],f32>)

// ZERO: error: sp-coalesce-collectives: bucket=0 is below its minimum 1
func.func @backward(%a: !torch.vtensor<[4,4],f32>, %b: !torch.vtensor<[4],f32>, %c: !torch.vtensor<[2,3],f32>, %q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>, %dq: !torch.vtensor<[2,2,16,16],f32>, %dk: !torch.vtensor<[2,1,16,16],f32>) -> (!torch.vtensor<[4,4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,2,16,16],f32>, !torch.vtensor<[2,1,16,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>) {
  %0 = "sp.all_to_all"(%q) {scatter_dim = 1 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,2,16,16],f32>
  %1 = "sp.all_to_all"(%k) {scatter_dim = 1 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,2,8,16],f32>) -> !torch.vtensor<[2,1,16,16],f32>
  %2 = torch.aten.neg %0 : !torch.vtensor<[2,2,16,16],f32> -> !torch.vtensor<[2,2,16,16],f32>
  %3 = "sp.all_to_all"(%dq) {scatter_dim = 2 : i64, gather_dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,2,16,16],f32>) -> !torch.vtensor<[2,4,8,16],f32>
  %4 = "sp.all_to_all"(%dk) {scatter_dim = 2 : i64, gather_dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,1,16,16],f32>) -> !torch.vtensor<[2,2,8,16],f32>
  %5 = "sp.all_reduce"(%a) {op = "sum", group = "sp"} : (!torch.vtensor<[4,4],f32>) -> !torch.vtensor<[4,4],f32>
  %6 = "sp.all_reduce"(%5) {op = "avg", group = "dp"} : (!torch.vtensor<[4,4],f32>) -> !torch.vtensor<[4,4],f32>
  %7 = "sp.all_reduce"(%b) {op = "sum", group = "sp"} : (!torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32>
  %8 = "sp.all_reduce"(%7) {op = "avg", group = "dp"} : (!torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32>
  %9 = "sp.all_reduce"(%c) {op = "sum", group = "sp"} : (!torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32>
  return %6, %8, %9, %2, %1, %3, %4 : !torch.vtensor<[4,4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,2,16,16],f32>, !torch.vtensor<[2,1,16,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>
}
