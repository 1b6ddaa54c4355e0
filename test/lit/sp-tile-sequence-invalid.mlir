// sp-tile-sequence diagnostics: a chunk count that is not a positive integer, at the function;
// more chunks than token rows, at the loss.
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-tile-sequence{chunks=0})' 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-tile-sequence{chunks=four})' 2>&1 | FileCheck %s --check-prefix=WORD
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-tile-sequence{chunks=9})' 2>&1 | FileCheck %s --check-prefix=MANY
// The pass runs on the joint step, before sp-plan-remat splits it.
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-remat,sp-tile-sequence)' 2>&1 | FileCheck %s --check-prefix=SPLIT

// Options are checked before any pass runs: the errors name the file, not a line.
// ZERO: {{.*}}sp-tile-sequence-invalid.mlir: error: sp-tile-sequence: chunks=0 is below its minimum 1 (token chunks per tiled region; unset: chosen from the shapes)
// WORD: {{.*}}sp-tile-sequence-invalid.mlir: error: sp-tile-sequence: chunks='four' is not an integer
// MANY: {{.*}}sp-tile-sequence-invalid.mlir:[[# @LINE + 11]]:{{[0-9]+}}: error: sp-tile-sequence: chunks=9 exceeds the 8 token rows of the loss ([8, 16] log-probabilities)
// SPLIT: error: sp-tile-sequence: the step is already split into @forward/@backward: sp-tile-sequence runs on the joint step, before sp-plan-remat
func.func @head(%w: !torch.vtensor<[16,4],f32>, %h: !torch.vtensor<[8,4],f32>, %tgt: !torch.vtensor<[8],si64>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:w", "input:h", "input:labels"], sp.results = ["loss"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32>
  %logp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[8,16],f32>
  %out, %tw = torch.aten.nll_loss_forward %logp, %tgt, %none, %int2, %int-100 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  return %out : !torch.vtensor<[],f32>
}
