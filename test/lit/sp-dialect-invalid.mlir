// One case per verifier rule of the sp dialect (dialects/sp.py) and per IRDL constraint. Each error
// is checked with its file:line, so the diagnostic must point at the offending op.
// RUN: not %autosp-opt %s --split-input-file 2>&1 | FileCheck %s

// === IRDL constraints (operand/result counts, attribute presence and kind)

func.func @missing_attribute(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_reduce' op attribute "group" is expected but not provided
  %0 = "sp.all_reduce"(%x) {op = "sum"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

// -----
func.func @attribute_kind(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: expected base attribute 'builtin.string' but got 'builtin.integer'
  %0 = "sp.all_reduce"(%x) {op = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

// -----
func.func @scale_kind(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: expected base attribute 'builtin.float' but got 'builtin.integer'
  %o, %l = "sp.attention"(%q, %q, %q) {causal = true, scale = 1 : i64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @operand_count(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: op expects exactly 1 operands, but got 2
  %0 = "sp.all_gather"(%x, %x) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8,4],f32>, !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

// -----
func.func @result_count(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:10: error: op expects exactly 1 results, but got 2
  %0:2 = "sp.shard_slice"(%x) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8,4],f32>) -> (!torch.vtensor<[2,4,4],f32>, !torch.vtensor<[2,4,4],f32>)
  return %0#0 : !torch.vtensor<[2,4,4],f32>
}

// -----
func.func @grad_result_count(%q: !torch.vtensor<[2,4,8,16],f32>, %l: !torch.vtensor<[2,4,8],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:3: error: op expects exactly 3 results, but got 0
  "sp.attention_grad"(%q, %q, %q, %q, %q, %l) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) -> ()
  return
}

// -----
// The verifiers read operands by index: a wrong count must reach IRDL's diagnostic, not crash.
func.func @attention_two_operands(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: op expects at least 3 operands, but got 2
  %o, %l = "sp.attention"(%q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}
// -----
func.func @attention_grad_three_operands(%q: !torch.vtensor<[2,4,8,16],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:10: error: op expects at least 6 operands, but got 3
  %a:3 = "sp.attention_grad"(%q, %q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>)
  return
}
// -----
func.func @all_reduce_no_operand() -> !torch.vtensor<[2,8],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: op expects exactly 1 operands, but got 0
  %0 = "sp.all_reduce"() {op = "sum", group = "sp"} : () -> !torch.vtensor<[2,8],f32>
  return %0 : !torch.vtensor<[2,8],f32>
}
// -----
func.func @halo_no_result(%x: !torch.vtensor<[2,8],si64>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:3: error: op expects exactly 1 results, but got 0
  "sp.halo"(%x) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> ()
  return
}
// -----
func.func @unknown_op(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: unregistered operation 'sp.broadcast' found in dialect ('sp') that does not allow unknown operations
  %0 = "sp.broadcast"(%x) {group = "sp"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

// -----
// === collectives: group, reduction kind, dims, ranks, types

func.func @group_name(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_reduce' op group must be one of sp, dp, world, ulysses, ring, got 'tp'
  %0 = "sp.all_reduce"(%x) {op = "sum", group = "tp"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

// -----
func.func @group_name_halo(%x: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.halo' op group must be one of sp, dp, world, ulysses, ring, got 'SP'
  %0 = "sp.halo"(%x) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "SP"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64>
  return %0 : !torch.vtensor<[2,8],si64>
}

// -----
func.func @all_reduce_op(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_reduce' op op must be one of sum, avg, max, got 'prod'
  %0 = "sp.all_reduce"(%x) {op = "prod", group = "sp"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

// -----
func.func @scatter_is_gather(%x: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_to_all' op scatter_dim must differ from gather_dim
  %0 = "sp.all_to_all"(%x) {scatter_dim = 2 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32>
  return %0 : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @scatter_dim_range(%x: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_to_all' op scatter_dim = 4 is out of range for a rank-4 operand
  %0 = "sp.all_to_all"(%x) {scatter_dim = 4 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32>
  return %0 : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @gather_dim_negative(%x: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_to_all' op gather_dim = -1 is out of range for a rank-4 operand
  %0 = "sp.all_to_all"(%x) {scatter_dim = 1 : i64, gather_dim = -1 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32>
  return %0 : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @all_gather_dim_range(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_gather' op dim = 2 is out of range for a rank-2 operand
  %0 = "sp.all_gather"(%x) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,16],f32>
  return %0 : !torch.vtensor<[2,16],f32>
}

// -----
func.func @reduce_scatter_dim_range(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.reduce_scatter' op dim = 5 is out of range for a rank-2 operand
  %0 = "sp.reduce_scatter"(%x) {dim = 5 : i64, group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}

// -----
func.func @shard_slice_dim_range(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.shard_slice' op dim = 2 is out of range for a rank-2 operand
  %0 = "sp.shard_slice"(%x) {dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}

// -----
func.func @halo_dim_range(%x: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.halo' op dim = 2 is out of range for a rank-2 operand
  %0 = "sp.halo"(%x) {dim = 2 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64>
  return %0 : !torch.vtensor<[2,8],si64>
}

// -----
func.func @rank_mismatch(%x: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,32,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_to_all' op result rank 3 differs from operand rank 4
  %0 = "sp.all_to_all"(%x) {scatter_dim = 1 : i64, gather_dim = 2 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,32,16],f32>
  return %0 : !torch.vtensor<[2,32,16],f32>
}

// -----
func.func @all_gather_rank_mismatch(%x: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[32],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_gather' op result rank 1 differs from operand rank 2
  %0 = "sp.all_gather"(%x) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[32],f32>
  return %0 : !torch.vtensor<[32],f32>
}

// -----
func.func @all_reduce_type(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f16> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.all_reduce' op result type must equal the operand type
  %0 = "sp.all_reduce"(%x) {op = "sum", group = "sp"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f16>
  return %0 : !torch.vtensor<[2,8,4],f16>
}

// -----
func.func @halo_type(%x: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,9],si64> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.halo' op result type must equal the operand type
  %0 = "sp.halo"(%x) {dim = 1 : i64, width = 1 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,9],si64>
  return %0 : !torch.vtensor<[2,9],si64>
}

// -----
func.func @halo_width(%x: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:8: error: 'sp.halo' op width must be >= 1, got 0
  %0 = "sp.halo"(%x) {dim = 1 : i64, width = 0 : i64, fill = -100.0 : f64, group = "sp"} : (!torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,8],si64>
  return %0 : !torch.vtensor<[2,8],si64>
}

// -----
// === attention

func.func @scale_zero(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op scale must be positive, got 0.0
  %o, %l = "sp.attention"(%q, %q, %q) {causal = true, scale = 0.0 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @scale_negative(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op scale must be positive, got -0.25
  %o, %l = "sp.attention"(%q, %q, %q) {causal = true, scale = -0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @kv_groups_zero(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op kv_groups must be >= 1, got 0
  %o, %l = "sp.attention"(%q, %q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 0 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @window_negative(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op window must be >= 0 (0: none), got -2
  %o, %l = "sp.attention"(%q, %q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = -2 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @window_not_causal(%q: !torch.vtensor<[2,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.ring_attention' op a window (4) needs causal attention
  %o, %l = "sp.ring_attention"(%q, %q, %q) {causal = false, scale = 0.25 : f64, kv_groups = 1 : i64, window = 4 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @documents_not_causal(%q: !torch.vtensor<[2,4,8,16],f32>, %d: !torch.vtensor<[2,8],si64>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op document positions need causal attention
  %o, %l = "sp.attention"(%q, %q, %q, %d) {causal = false, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @documents_shape(%q: !torch.vtensor<[2,4,8,16],f32>, %d: !torch.vtensor<[2,4],si64>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.ring_attention' op document positions [2, 4] must be [batch, seq] of the queries [2, 4, 8, 16]
  %o, %l = "sp.ring_attention"(%q, %q, %q, %d) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64, group = "sp"} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4],si64>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @documents_dtype(%q: !torch.vtensor<[2,4,8,16],f32>, %l: !torch.vtensor<[2,4,8],f32>, %d: !torch.vtensor<[2,8],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:10: error: 'sp.attention_grad' op document positions must be si64, got !torch.vtensor<[2,8],f32>
  %g:3 = "sp.attention_grad"(%q, %q, %q, %q, %q, %l, %d) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>, !torch.vtensor<[2,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>)
  return
}

// -----
func.func @rank_3(%q: !torch.vtensor<[4,8,16],f32>) -> !torch.vtensor<[4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op expects rank-4 [batch, heads, seq, head_dim] operands, got ranks 3, 3, 3
  %o, %l = "sp.attention"(%q, %q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[4,8,16],f32>, !torch.vtensor<[4,8,16],f32>, !torch.vtensor<[4,8,16],f32>) -> (!torch.vtensor<[4,8,16],f32>, !torch.vtensor<[4,8],f32>)
  return %o : !torch.vtensor<[4,8,16],f32>
}

// -----
func.func @key_value_shapes(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,4,8,16],f32>, %v: !torch.vtensor<[2,4,8,8],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op key shape [2, 4, 8, 16] differs from value shape [2, 4, 8, 8]
  %o, %l = "sp.attention"(%q, %k, %v) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @kv_groups_heads(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op 4 query heads != 2 key/value heads x kv_groups 1
  %o, %l = "sp.attention"(%q, %k, %k) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @head_dim(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,4,8,8],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op query shape [2, 4, 8, 16] and key shape [2, 4, 8, 8] disagree on batch or head_dim
  %o, %l = "sp.attention"(%q, %k, %k) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,8],f32>, !torch.vtensor<[2,4,8,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
func.func @batch(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[1,4,8,16],f32>) -> !torch.vtensor<[2,4,8,16],f32> {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.attention' op query shape [2, 4, 8, 16] and key shape [1, 4, 8, 16] disagree on batch or head_dim
  %o, %l = "sp.attention"(%q, %k, %k) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[1,4,8,16],f32>, !torch.vtensor<[1,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return %o : !torch.vtensor<[2,4,8,16],f32>
}

// -----
// === attention_grad: the forward rules on (q, k, v), and each gradient shaped like its primal

func.func @grad_kv_groups(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>, %l: !torch.vtensor<[2,4,8],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:10: error: 'sp.attention_grad' op 4 query heads != 2 key/value heads x kv_groups 4
  %a:3 = "sp.attention_grad"(%q, %q, %k, %k, %q, %l) {causal = true, scale = 0.25 : f64, kv_groups = 4 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>)
  return
}

// -----
func.func @grad_shape(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>, %l: !torch.vtensor<[2,4,8],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:10: error: 'sp.attention_grad' op gradient shape [2, 4, 8, 16] differs from its operand's shape [2, 2, 8, 16]
  %a:3 = "sp.attention_grad"(%q, %q, %k, %k, %q, %l) {causal = true, scale = 0.25 : f64, kv_groups = 2 : i64, window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>)
  return
}

// -----
// === ring_attention / ring_attention_grad: the attention rules, and a group of the mesh

func.func @ring_group(%q: !torch.vtensor<[2,4,8,16],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.ring_attention' op group must be one of sp, dp, world, ulysses, ring, got 'tp'
  %o, %l = "sp.ring_attention"(%q, %q, %q) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, group = "tp", window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return
}

// -----

func.func @ring_kv_groups(%q: !torch.vtensor<[2,4,8,16],f32>, %k: !torch.vtensor<[2,2,8,16],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:12: error: 'sp.ring_attention' op 4 query heads != 2 key/value heads x kv_groups 1
  %o, %l = "sp.ring_attention"(%q, %k, %k) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, group = "sp", window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>, !torch.vtensor<[2,2,8,16],f32>) -> (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>)
  return
}

// -----

func.func @ring_grad_shape(%q: !torch.vtensor<[2,4,8,16],f32>, %l: !torch.vtensor<[2,4,8],f32>) {
  // CHECK: {{.*}}sp-dialect-invalid.mlir:[[# @LINE + 1]]:10: error: 'sp.ring_attention_grad' op gradient shape [2, 4, 4, 16] differs from its operand's shape [2, 4, 8, 16]
  %a:3 = "sp.ring_attention_grad"(%q, %q, %q, %q, %q, %l) {causal = true, scale = 0.25 : f64, kv_groups = 1 : i64, group = "sp", window = 0 : i64} : (!torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8],f32>) -> (!torch.vtensor<[2,4,4,16],f32>, !torch.vtensor<[2,4,8,16],f32>, !torch.vtensor<[2,4,8,16],f32>)
  return
}

// -----
// The valid chunk of a failing file is still printed: errors do not stop the other chunks.
// CHECK-LABEL: func.func @still_printed
// CHECK: "sp.all_reduce"
func.func @still_printed(%x: !torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32> {
  %0 = "sp.all_reduce"(%x) {op = "sum", group = "sp"} : (!torch.vtensor<[2,8,4],f32>) -> !torch.vtensor<[2,8,4],f32>
  return %0 : !torch.vtensor<[2,8,4],f32>
}

