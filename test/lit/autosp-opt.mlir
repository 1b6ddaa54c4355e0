// The driver: textual pipelines mixing autosp (Python) passes with upstream ones, nested pass
// managers, IR printing, --split-input-file, -o, --emit=host-program and --list-passes.
//
// The default pipeline with its cse nested under func.func; IR dumps go to stderr.
// RUN: %autosp-opt %s --split-input-file --mlir-print-ir-after-all --pass-pipeline='builtin.module(sp-raise-attention,sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1},canonicalize,func.func(cse))' 2>&1 | FileCheck %s --check-prefix=MIX
// The same pipeline lowered to the host program (JSON), written with -o.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-raise-attention,sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1},canonicalize,func.func(cse))' --emit=host-program -o %t.json
// RUN: FileCheck %s --check-prefix=HOST --input-file %t.json
// RUN: %autosp-opt --list-passes | FileCheck %s --check-prefix=LIST

// Every pass with its summary, then each option with its type, default and meaning.
// LIST:      sp-raise-attention {{ +}}raise captured attention fwd/bwd to sp.attention / sp.attention_grad
// LIST-NEXT: sp-merge-projections {{ +}}one matmul for the projections of one input (q / k / v, gate / up), forward and backward
// LIST-NEXT: sp-propagate-sequence {{ +}}assign rep / partial / seq<d> layouts to every value
// LIST-NEXT: sp-partition-sequence {{ +}}shard the sequence across sp ranks: local shapes and collectives
// LIST-NEXT:     sp=int, default 1: sequence-parallel degree: the ranks that share one sequence
// LIST-NEXT:     dp=int, default 1: data-parallel degree: replicas with their own batches (world = sp x dp)
// LIST-NEXT:     attention=str, default auto: ulysses (heads split by all-to-alls), ring (K/V blocks passed around the ranks), hybrid (ulysses x ring), UxR (those degrees, e.g. 2x4), or auto: the one that sends the fewest bytes
// LIST-NEXT: sp-pad-sequence {{ +}}take `length` tokens per sequence, padded at the end to the captured length inside the step
// LIST-NEXT:     length=int, default 0: the sequence length the step takes (0: the captured length, no padding)
// LIST-NEXT: sp-elide-halo {{ +}}shift a sharded replicated value (the labels) on every rank, without the sp.halo exchange
// LIST-NEXT: sp-tile-sequence {{ +}}run the LM head + loss and the wide token-local regions (MLPs) in chunks of tokens (fwd and bwd)
// LIST-NEXT:     chunks=int, default unset: token chunks per tiled region; unset: chosen from the shapes
// LIST-NEXT:     floor=Bytes, default 4MiB: chunks chosen from the shapes: none whose tile is below this size (0: no floor)
// LIST-NEXT: sp-plan-remat {{ +}}split the step into @forward/@backward; save or recompute per policy
// LIST-NEXT:     policy=str (none | full | sac | auto), default sac: what the forward saves for the backward
// LIST-NEXT:     budget=Bytes, default unset: policy=auto: the per-rank peak the plan must fit (e.g. 12GiB)
// LIST-NEXT:     bucket=Bytes, default 0: policy=auto: the bucket of the sp-coalesce-collectives that follows (0: none), so each candidate's peak is the final one
// LIST-NEXT:     fuse=int, default 0: policy=auto: min_ops of the sp-fuse that follows (0: none), so each candidate's peak is the final one
// LIST-NEXT: sp-coalesce-collectives {{ +}}pack adjacent all-reduces / all-to-alls of one kind into one collective (gradient buckets)
// LIST-NEXT:     bucket=Bytes, default 25MiB: the most bytes one packed collective carries (DDP's default bucket)
// LIST-NEXT: sp-fuse {{ +}}outline fusible regions of @forward / @backward into kernel functions (func.call)
// LIST-NEXT:     min_ops=int, default 2: the fewest ops a kernel holds; smaller regions stay ATen calls
// LIST-NEXT: sp-plan-memory {{ +}}lifetimes and the predicted per-rank peak of one step (sp.memory)
// LIST-NEXT:     budget=Bytes, default unset: fail when the predicted per-rank peak exceeds it (e.g. 12GiB)
// LIST-NEXT: sp-pipeline {{ +}}the default pipeline: captured step -> partitioned, tiled @forward/@backward with a memory plan
// LIST-NEXT:     sp=int, default 1: sequence-parallel degree
// LIST-NEXT:     dp=int, default 1: data-parallel degree (world = sp x dp)
// LIST-NEXT:     attention=str, default auto: ulysses (heads split by all-to-alls), ring (K/V blocks passed around the ranks), hybrid (ulysses x ring), UxR (those degrees, e.g. 2x4), or auto: the one that sends the fewest bytes
// LIST-NEXT:     remat=str (none | full | sac | auto), default sac: what the forward saves for the backward
// LIST-NEXT:     budget=Bytes, default unset: per-rank memory budget: remat=auto plans to fit it, the memory plan fails above it
// LIST-NEXT:     tile=str, default auto: token chunks for the LM head + loss and the MLPs: auto, N, or 0 (off)
// LIST-NEXT:     length=int, default 0: the sequence length the step takes, when it was captured padded to a multiple of 2 x sp (0: as captured)
// LIST-NEXT:     bucket=Bytes, default 25MiB: the most bytes one packed collective carries; 0: one collective each

// One dump per pass and per chunk, in pipeline order; the nested cse dumps the func it ran on.
// MIX:      // -----// IR Dump After sp-raise-attention: sp-raise-attention //----- //
// MIX-NEXT: module {
// MIX-NEXT:   func.func @train_step
// MIX-NOT:    torch.operator
// MIX:        "sp.attention"
// MIX:      // -----// IR Dump After sp-propagate-sequence: sp-propagate-sequence //----- //
// MIX:        sp.layout = ["seq<2>", "heads<1>"]
// MIX:      // -----// IR Dump After sp-partition-sequence: sp-partition-sequence //----- //
// MIX:        "sp.all_to_all"
// MIX:      // -----// IR Dump After CanonicalizerPass: canonicalize
// MIX:      // -----// IR Dump After CSEPass: cse //----- //
// MIX-NEXT: func.func @train_step
// MIX:      // -----// IR Dump After sp-raise-attention: sp-raise-attention //----- //
// MIX:        func.func @second
// MIX:      // -----// IR Dump After sp-propagate-sequence: sp-propagate-sequence //----- //
// MIX:      // -----// IR Dump After sp-partition-sequence: sp-partition-sequence //----- //
// MIX:      // -----// IR Dump After CanonicalizerPass: canonicalize
// The partial sum is all-reduced twice: for the rsqrt (a demand) and as a result.
// MIX-COUNT-2: "sp.all_reduce"
// MIX:      // -----// IR Dump After CSEPass: cse //----- //
// MIX-NEXT: func.func @second
// Then the final output on stdout, one module per chunk, separated like the input.
// MIX:      module attributes {sp.attention_scheme = {{.*}}, sp.mesh = {dp = 1 : i64, sp = 2 : i64}} {
// MIX-NEXT:   func.func @train_step
// MIX-NOT:    torch.operator
// MIX:        "sp.attention"
// Canonicalize dropped the constants only the captured attention op read.
// MIX-NOT:    torch.constant.float 5.000000e-01
// MIX:        return
// MIX:      // -----
// MIX-NEXT: module attributes {sp.mesh = {dp = 1 : i64, sp = 2 : i64}} {
// MIX-NEXT:   func.func @second
// cse merged the two identical all-reduces.
// MIX:          %[[S:[0-9]+]] = torch.aten.sum.dim_IntList
// MIX-NEXT:     %[[R:[0-9]+]] = "sp.all_reduce"(%[[S]]) {group = "sp", op = "sum"}
// MIX-NEXT:     %[[Q:[0-9]+]] = torch.aten.rsqrt %[[R]]
// MIX-NEXT:     return %[[R]], %[[Q]]

// The host program of the tiny step: rank-agnostic (global arg shapes), every collective the
// partition inserted, per-rank result shapes, and registers freed after their last use.
// HOST:      "format_version": 5,
// HOST:      "mesh": {
// HOST-NEXT:  "sp": 2,
// HOST-NEXT:  "dp": 1
// HOST:      "role": "param",
// HOST-NEXT: "name": "emb",
// HOST:      "role": "input",
// HOST-NEXT: "name": "input_ids",
// HOST-NEXT: "shape": [
// HOST-NEXT:  2,
// HOST-NEXT:  8
// HOST:      "results": [
// HOST-NEXT:  "loss",
// HOST-NEXT:  "grad:emb"
// HOST:      "instructions": [
// HOST:      "op": "sp.shard_slice",
// HOST:      "attrs": {
// HOST-NEXT:  "dim": 1,
// HOST-NEXT:  "group": "sp"
// HOST:      "op": "aten.embedding.default",
// HOST:      "shapes": [
// HOST-NEXT:  [
// HOST-NEXT:   2,
// HOST-NEXT:   4,
// HOST-NEXT:   16
// HOST:      "op": "aten.mm.default",
// HOST:      "op": "sp.all_to_all",
// HOST:      "attrs": {
// HOST-NEXT:  "gather_dim": 2,
// HOST-NEXT:  "group": "sp",
// HOST-NEXT:  "scatter_dim": 1
// HOST:      "op": "sp.attention",
// HOST:      "attrs": {
// HOST-NEXT:  "causal": true,
// HOST-NEXT:  "kv_groups": 2,
// HOST-NEXT:  "scale": 0.5
// HOST:      "op": "sp.all_to_all",
// HOST:      "op": "aten._log_softmax.default",
// HOST:      "op": "sp.halo",
// HOST:      "attrs": {
// HOST-NEXT:  "dim": 1,
// HOST-NEXT:  "fill": -100.0,
// HOST-NEXT:  "group": "sp",
// HOST-NEXT:  "width": 1
// HOST:      "op": "aten.nll_loss_forward.default",
// HOST:      "op": "sp.all_reduce",
// HOST:      "op": "sp.all_reduce",
// HOST:      "op": "aten.div.Tensor",
// HOST:      "op": "aten.embedding_dense_backward.default",
// HOST:      "free": [
// HOST:      "op": "sp.all_reduce",
// HOST:      "outputs": [
// HOST-NOT:  "op": "torch.
// HOST:      // -----
// HOST:      "op": "aten.sum.dim_IntList",
// HOST:      "op": "sp.all_reduce",
// HOST-NOT:  "op": "sp.all_reduce",
// HOST:      "op": "aten.rsqrt.default",
// HOST:      "outputs": [

func.func @train_step(%emb: !torch.vtensor<[32,16],f32>, %wk: !torch.vtensor<[16,8],f32>, %ids: !torch.vtensor<[2,8],si64>, %labels: !torch.vtensor<[2,8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[32,16],f32>) attributes {sp.args = ["param:emb", "param:wk", "input:input_ids", "input:labels"], sp.results = ["loss", "grad:emb"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %int32 = torch.constant.int 32
  %int-100 = torch.constant.int -100
  %intmax = torch.constant.int 9223372036854775807
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %none = torch.constant.none
  %scale = torch.constant.float 5.000000e-01
  %fill = torch.constant.float -1.000000e+02
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[32,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[2,8,16],f32>
  %lq = torch.prim.ListConstruct %int2, %int8, %int4, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %q4 = torch.aten.view %x, %lq : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,8,4,4],f32>
  %q = torch.aten.transpose.int %q4, %int1, %int2 : !torch.vtensor<[2,8,4,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4,8,4],f32>
  %l2 = torch.prim.ListConstruct %int16, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %tok = torch.aten.view %x, %l2 : !torch.vtensor<[2,8,16],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %kf = torch.aten.mm %tok, %wk : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
  %lk = torch.prim.ListConstruct %int2, %int8, %int2, %int4 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %k4 = torch.aten.view %kf, %lk : !torch.vtensor<[16,8],f32>, !torch.list<int> -> !torch.vtensor<[2,8,2,4],f32>
  %k = torch.aten.transpose.int %k4, %int1, %int2 : !torch.vtensor<[2,8,2,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,2,8,4],f32>
  %window1 = torch.constant.int 0
  %att:2 = torch.operator "torch.autosp.attention"(%q, %k, %k, %true, %scale, %window1) : (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.vtensor<[2,2,8,4],f32>, !torch.bool, !torch.float, !torch.int) -> (!torch.vtensor<[2,4,8,4],f32>, !torch.vtensor<[2,4,8],f32>)
  %o = torch.aten.transpose.int %att#0, %int1, %int2 : !torch.vtensor<[2,4,8,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,8,4,4],f32>
  %ov = torch.aten.view %o, %l2 : !torch.vtensor<[2,8,4,4],f32>, !torch.list<int> -> !torch.vtensor<[16,16],f32>
  %et = torch.aten.t %emb : !torch.vtensor<[32,16],f32> -> !torch.vtensor<[16,32],f32>
  %logits = torch.aten.mm %ov, %et : !torch.vtensor<[16,16],f32>, !torch.vtensor<[16,32],f32> -> !torch.vtensor<[16,32],f32>
  %lp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[16,32],f32>, !torch.int, !torch.bool -> !torch.vtensor<[16,32],f32>
  %pad = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %labels, %pad, %fill : !torch.vtensor<[2,8],si64>, !torch.list<int>, !torch.float -> !torch.vtensor<[2,9],si64>
  %shifted = torch.aten.slice.Tensor %padded, %int1, %int1, %intmax, %int1 : !torch.vtensor<[2,9],si64>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,8],si64>
  %l1 = torch.prim.ListConstruct %int16 : (!torch.int) -> !torch.list<int>
  %tgt = torch.aten.view %shifted, %l1 : !torch.vtensor<[2,8],si64>, !torch.list<int> -> !torch.vtensor<[16],si64>
  %loss, %tw = torch.aten.nll_loss_forward %lp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %gemb = torch.aten.embedding_dense_backward %x, %ids, %int32, %int-1, %false : !torch.vtensor<[2,8,16],f32>, !torch.vtensor<[2,8],si64>, !torch.int, !torch.int, !torch.bool -> !torch.vtensor<[32,16],f32>
  return %loss, %gemb : !torch.vtensor<[],f32>, !torch.vtensor<[32,16],f32>
}
// -----
func.func @second(%ids: !torch.vtensor<[1,4],si64>, %emb: !torch.vtensor<[8,4],f32>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>) attributes {sp.args = ["input:input_ids", "param:emb"], sp.results = ["grad:s", "r"]} {
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %none = torch.constant.none
  %x = torch.aten.embedding %emb, %ids, %int-1, %false, %false : !torch.vtensor<[8,4],f32>, !torch.vtensor<[1,4],si64>, !torch.int, !torch.bool, !torch.bool -> !torch.vtensor<[1,4,4],f32>
  %dims = torch.prim.ListConstruct %int0, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %s = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[1,4,4],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[4],f32>
  %r = torch.aten.rsqrt %s : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %s, %r : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32>
}
