// sp-partition-sequence diagnostics (sp=2), at the location of the offending op / func.
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1})' 2>&1 | FileCheck %s
// attention=ulysses where sp does not divide the heads (auto takes the ring there).
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1 attention=ulysses})' 2>&1 | FileCheck %s --check-prefix=ULYSSES
// Without sp-propagate-sequence first, the layouts it writes are missing (first chunk checked).
// RUN: not %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-partition-sequence{sp=2})' 2>&1 | FileCheck %s --check-prefix=NOPROP

// NOPROP: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 2]]:1: error: sp-partition-sequence: the function has no 'sp.seq_len' attribute; it is set by sp-propagate-sequence
// CHECK: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 1]]:1: error: sp-partition-sequence: sequence length 7 is not divisible by sp=2
func.func @seq_len_not_divisible(%ids: !torch.vtensor<[2,7],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[32,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["grad:w"]} {
  %int32 = torch.constant.int 32
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,7],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,7,16],f32>
  %g = torch.aten.embedding_dense_backward %x, %ids, %int32, %int-1, %false : !torch.vtensor<[2,7,16],f32>, !torch.vtensor<[2,7],si64>, !torch.int, !torch.int, !torch.bool -> !torch.vtensor<[32,16],f32>
  return %g : !torch.vtensor<[32,16],f32>
}
// -----
func.func @heads_not_divisible(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,12],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["loss"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,12],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,12],f32>
  %l = torch.prim.ListConstruct %int2, %int8, %int3, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %v = torch.aten.view %x, %l : !torch.vtensor<[2,8,12],f32>, !torch.list<int> -> !torch.vtensor<[2,8,3,4],f32>
  %q = torch.aten.transpose.int %v, %int1, %int2 : !torch.vtensor<[2,8,3,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,3,8,4],f32>
  // ULYSSES: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-partition-sequence: attention has 3 heads, which sp=2 does not divide (Ulysses splits heads across ranks; attention=ring or auto passes K/V blocks around the ranks instead)
  %o, %lse = "sp.attention"(%q, %q, %q) {causal = true, scale = 0.5 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,3,8,4],f32>) -> (!torch.vtensor<[2,3,8,4],f32>, !torch.vtensor<[2,3,8],f32>)
  %s = torch.aten.sum %o, %none : !torch.vtensor<[2,3,8,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// [B*S, E] tokens plus a replicated [16, 16] operand: dim 0 is sharded, but it is not the
// sequence (length 8), so the replicated operand cannot be sliced to match.
func.func @replicated_meets_tokens(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>, %r: !torch.vtensor<[16,16],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["input:input_ids", "param:w", "param:r"], sp.results = ["loss"]} {
  %int1 = torch.constant.int 1
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  // CHECK: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-partition-sequence: a replicated operand of shape [16, 16] meets a sequence-sharded one along dim 0, but that dim is not the sequence (length 8)
  %y = torch.aten.add.Tensor %tok, %r, %int1 : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,16],f32>, !torch.int -> !torch.vtensor<[16,16],f32>
  %s = torch.aten.sum %y, %none : !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// A partial sum (a product over the tokens) added to sequence-sharded tokens of the same shape.
func.func @partial_meets_tokens(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["loss"]} {
  %int1 = torch.constant.int 1
  %int16 = torch.constant.int 16
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %l = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %tt = torch.aten.t %tok : !torch.vtensor<[16,16],f32> -> !torch.vtensor<[16,16],f32>
  %gram = torch.aten.mm %tt, %tok : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,16],f32> -> !torch.vtensor<[16,16],f32>
  // CHECK: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-partition-sequence: no conversion from layout partial to seq<0>
  %y = torch.aten.add.Tensor %tok, %gram, %int1 : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,16],f32>, !torch.int -> !torch.vtensor<[16,16],f32>
  %s = torch.aten.sum %y, %none : !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
// Every op is re-run on meta tensors of its local types: a rule that shards one operand of a
// contraction but not the other is caught here (the batch dim of the bmm is the sequence).
func.func @local_shapes_do_not_run(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>, %r: !torch.vtensor<[8,16,4],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["input:input_ids", "param:w", "param:r"], sp.results = ["loss"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %perm = torch.prim.ListConstruct %int1, %int0, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %sbe = torch.aten.permute %x, %perm : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[8,2,16],f32>
  // CHECK: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 1]]:{{[0-9]+}}: error: sp-partition-sequence: torch.aten.bmm cannot run at the local shapes: {{.+}}
  %y = torch.aten.bmm %sbe, %r : !torch.vtensor<[8,2,16],f32>, !torch.vtensor<[8,16,4],f32> -> !torch.vtensor<[8,2,4],f32>
  %s = torch.aten.sum %y, %none : !torch.vtensor<[8,2,4],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %s : !torch.vtensor<[],f32>
}
// -----
func.func @result_sequence_sharded(%ids: !torch.vtensor<[2,8],si64>, %w: !torch.vtensor<[32,16],f32>) -> !torch.vtensor<[2,8,16],f32> attributes {sp.args = ["input:input_ids", "param:w"], sp.results = ["hidden"]} {
  %int-1 = torch.constant.int -1
  %false = torch.constant.bool false
  %x = torch.aten.embedding %w, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  // CHECK: {{.*}}sp-partition-sequence-invalid.mlir:[[# @LINE + 1]]:3: error: sp-partition-sequence: result hidden has layout seq<1>; results must be replicated or partial
  return %x : !torch.vtensor<[2,8,16],f32>
}
