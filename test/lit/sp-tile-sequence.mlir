// sp-tile-sequence{chunks=N}: the LM head + log-softmax + nll loss chain, forward and backward,
// runs in N chunks of token rows; no [tokens, vocab] tensor is left. Chains it cannot tile are left as
// they are.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=4})' | FileCheck %s
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=4})' | FileCheck %s --check-prefix=WHOLE
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=3})' | FileCheck %s --check-prefix=UNEVEN
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{floor=0})' | FileCheck %s --check-prefix=DEFAULT
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=1})' | FileCheck %s --check-prefix=ONE
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence)' | FileCheck %s --check-prefix=ONE
// The tiled step lowers to the host program: every op it emits is one the runtime executes.
// RUN: %autosp-opt %s --split-input-file --pass-pipeline='builtin.module(sp-tile-sequence{chunks=4})' --emit=host-program | FileCheck %s --check-prefix=HOST

// The joint step of a partitioned head: T = 8 tokens (2 x 4), hidden D = 4, vocab V = 16. The
// loss is the local sum, all-reduced and divided by the all-reduced token count; the backward
// reads the global count. d(hidden) = mm(G, t(wt)) is defined after d(W) = mm(t(G), h): the
// operand t(wt) moves up so both read each gradient chunk while it is live.
// CHECK:       module attributes {sp.tiles = [{chunks = 4 : i64, kind = "lm_head", module = "lm_head", tokens = 8 : i64, width = 16 : i64}]}
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[WT:[0-9]+]] = torch.aten.t %arg0 : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
// CHECK:         %[[H:[0-9]+]] = torch.aten.view %arg1
// CHECK:         %[[TG:[0-9]+]] = torch.aten.view %arg2
// CHECK:         %[[H0:[0-9]+]] = torch.aten.slice.Tensor %[[H]], %int0, %int0, %int2{{[_0-9]*}}, %int1{{[_0-9]*}} : !torch.vtensor<[8,4],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
// CHECK-COUNT-3: torch.aten.slice.Tensor %[[H]], {{.*}} -> !torch.vtensor<[2,4],f32>
// CHECK:         %[[T0:[0-9]+]] = torch.aten.slice.Tensor %[[TG]], {{.*}} -> !torch.vtensor<[2],si64>
// CHECK-COUNT-3: torch.aten.slice.Tensor %[[TG]], {{.*}} -> !torch.vtensor<[2],si64>
// forward, chunk 0: logits, log-softmax and the summed nll of rows [0, 2)
// CHECK:         %[[L0:[0-9]+]] = torch.aten.mm %[[H0]], %[[WT]] : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[2,16],f32>
// CHECK:         %[[P0:[0-9]+]] = torch.aten._log_softmax %[[L0]], %int1, %false : !torch.vtensor<[2,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[2,16],f32>
// CHECK:         %[[O0:[a-z0-9_]+]], %[[W0:[a-z0-9_]+]] = torch.aten.nll_loss_forward %[[P0]], %[[T0]], %none, %int2{{[_0-9]*}}, %int-100
// CHECK:         %[[O1:[a-z0-9_]+]], %[[W1:[a-z0-9_]+]] = torch.aten.nll_loss_forward
// CHECK:         %[[S1:[0-9]+]] = torch.aten.add.Tensor %[[O0]], %[[O1]]
// CHECK:         %[[C1:[0-9]+]] = torch.aten.add.Tensor %[[W0]], %[[W1]]
// CHECK-COUNT-2: torch.aten.nll_loss_forward {{.*}} -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
// the partition's reduction reads the sum of the chunk sums and of the chunk weights
// CHECK:         %[[SUM:[0-9]+]] = "sp.all_reduce"(%{{[0-9]+}})
// CHECK:         %[[CNT:[0-9]+]] = "sp.all_reduce"(%{{[0-9]+}})
// CHECK:         %[[LOSS:[0-9]+]] = torch.aten.div.Tensor %[[SUM]], %[[CNT]]
// CHECK:         %[[G:[0-9]+]] = torch.aten.ones_like %[[LOSS]]
// CHECK:         %[[WTT:[0-9]+]] = torch.aten.t %[[WT]] : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32>
// backward, chunk 0: the chunk's logits again, its gradient with the global count, both products
// CHECK:         %[[RL0:[0-9]+]] = torch.aten.mm %[[H0]], %[[WT]] : {{.*}} -> !torch.vtensor<[2,16],f32>
// CHECK:         %[[RP0:[0-9]+]] = torch.aten._log_softmax %[[RL0]]
// CHECK:         %[[DP0:[0-9]+]] = torch.aten.nll_loss_backward %[[G]], %[[RP0]], %[[T0]], %none, %int1, %int-100, %[[CNT]] : {{.*}} -> !torch.vtensor<[2,16],f32>
// CHECK:         %[[DX0:[0-9]+]] = torch.aten._log_softmax_backward_data %[[DP0]], %[[RP0]], %int1, %int6 : {{.*}} -> !torch.vtensor<[2,16],f32>
// CHECK:         %[[DH0:[0-9]+]] = torch.aten.mm %[[DX0]], %[[WTT]] : !torch.vtensor<[2,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[2,4],f32>
// CHECK:         %[[DT0:[0-9]+]] = torch.aten.t %[[DX0]] : !torch.vtensor<[2,16],f32> -> !torch.vtensor<[16,2],f32>
// CHECK:         %[[DW0:[0-9]+]] = torch.aten.mm %[[DT0]], %[[H0]] : !torch.vtensor<[16,2],f32>, !torch.vtensor<[2,4],f32> -> !torch.vtensor<[16,4],f32>
// chunks 1..3 add their d(W) contribution onto the running sum
// CHECK:         %[[DH1:[0-9]+]] = torch.aten.mm {{.*}} -> !torch.vtensor<[2,4],f32>
// CHECK:         %[[DW1:[0-9]+]] = torch.aten.addmm %[[DW0]], %{{[0-9]+}}, %{{[0-9]+}}, %int1{{[_0-9]*}}, %int1{{[_0-9]*}} : {{.*}} -> !torch.vtensor<[16,4],f32>
// CHECK:         %[[DH2:[0-9]+]] = torch.aten.mm {{.*}} -> !torch.vtensor<[2,4],f32>
// CHECK:         %[[DW2:[0-9]+]] = torch.aten.addmm %[[DW1]],
// CHECK:         %[[DH3:[0-9]+]] = torch.aten.mm {{.*}} -> !torch.vtensor<[2,4],f32>
// CHECK:         %[[DW3:[0-9]+]] = torch.aten.addmm %[[DW2]],
// d(hidden): the chunks concatenated along the tokens
// CHECK:         %[[PARTS:[0-9]+]] = torch.prim.ListConstruct %[[DH0]], %[[DH1]], %[[DH2]], %[[DH3]] : {{.*}} -> !torch.list<vtensor>
// CHECK:         %[[DH:[0-9]+]] = torch.aten.cat %[[PARTS]], %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[8,4],f32>
// CHECK:         %[[DH3D:[0-9]+]] = torch.aten.view %[[DH]]
// CHECK:         return %[[LOSS]], %[[DW3]], %[[DH3D]]

// 4 chunks: 4 log-softmax in the forward and 4 in the backward, all [2, 16]; nothing [8, 16] is left.
// WHOLE-LABEL: func.func @train_step(
// WHOLE-NOT:     vtensor<[8,16]
// WHOLE-NOT:     vtensor<[2,4,16]
// WHOLE-COUNT-8: torch.aten._log_softmax {{.*}} -> !torch.vtensor<[2,16],f32>
// WHOLE-NOT:     vtensor<[8,16]
// WHOLE:         return

// chunks=3 does not divide 8 tokens: balanced chunks of 3, 3 and 2 rows.
// UNEVEN-LABEL: func.func @train_step(
// UNEVEN-NOT:     vtensor<[8,16]
// UNEVEN:         torch.aten.slice.Tensor {{.*}} -> !torch.vtensor<[3,4],f32>
// UNEVEN-NEXT:    torch.constant.int 6
// UNEVEN-NEXT:    torch.aten.slice.Tensor {{.*}} -> !torch.vtensor<[3,4],f32>
// UNEVEN-NEXT:    torch.constant.int 8
// UNEVEN-NEXT:    torch.aten.slice.Tensor {{.*}} -> !torch.vtensor<[2,4],f32>
// UNEVEN-COUNT-2: torch.aten._log_softmax {{.*}} -> !torch.vtensor<[3,16],f32>
// UNEVEN:         torch.aten._log_softmax {{.*}} -> !torch.vtensor<[2,16],f32>
// UNEVEN:         torch.aten.cat {{.*}} -> !torch.vtensor<[8,4],f32>

// Without chunks or floor: the smallest N with a [8/N, 16] fp32 tile <= 2 x the [8, 4] activation: N = 2.
// DEFAULT-LABEL: func.func @train_step(
// DEFAULT-NOT:     vtensor<[8,16]
// DEFAULT-COUNT-4: torch.aten._log_softmax {{.*}} -> !torch.vtensor<[4,16],f32>
// DEFAULT-NOT:     vtensor<[8,16]
// DEFAULT:         return

// chunks=1, or the default floor (4MiB: no chunk of a smaller tile; these logits are 512 bytes): unchanged.
// ONE-LABEL: func.func @train_step(
// ONE:         torch.aten.mm {{.*}} -> !torch.vtensor<[8,16],f32>
// ONE:         torch.aten._log_softmax {{.*}} -> !torch.vtensor<[8,16],f32>
// ONE-NOT:     torch.aten.slice.Tensor
// ONE:         return

// HOST: "train_step"
// HOST: "op": "aten.slice.Tensor"
// HOST: "op": "aten.nll_loss_forward.default"
// HOST: "op": "aten.nll_loss_backward.default"
// HOST: "op": "aten.addmm.default"
// HOST: "op": "aten.cat.default"

#head = loc("lm_head"("model.py":30:0))
#loss = loc("model.py":31:0)
func.func @train_step(%w: !torch.vtensor<[16,4],f32>, %x: !torch.vtensor<[2,4,4],f32>, %labels: !torch.vtensor<[2,4],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[2,4,4],f32>) attributes {sp.args = ["param:lm_head.weight", "input:x", "input:labels"], sp.results = ["loss", "grad:lm_head.weight", "grad:x"]} {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int6 = torch.constant.int 6
  %int8 = torch.constant.int 8
  %int16 = torch.constant.int 16
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %s8x4 = torch.prim.ListConstruct %int8, %int4 : (!torch.int, !torch.int) -> !torch.list<int>
  %s2x4x16 = torch.prim.ListConstruct %int2, %int4, %int16 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %s8x16 = torch.prim.ListConstruct %int8, %int16 : (!torch.int, !torch.int) -> !torch.list<int>
  %s8 = torch.prim.ListConstruct %int8 : (!torch.int) -> !torch.list<int>
  %s2x4x4 = torch.prim.ListConstruct %int2, %int4, %int4 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32> loc(#head)
  %h = torch.aten.view %x, %s8x4 : !torch.vtensor<[2,4,4],f32>, !torch.list<int> -> !torch.vtensor<[8,4],f32> loc(#head)
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32> loc(#head)
  %l3 = torch.aten._unsafe_view %logits, %s2x4x16 : !torch.vtensor<[8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,16],f32> loc(#head)
  %l2 = torch.aten.view %l3, %s8x16 : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[8,16],f32> loc(#loss)
  %tgt = torch.aten.view %labels, %s8 : !torch.vtensor<[2,4],si64>, !torch.list<int> -> !torch.vtensor<[8],si64> loc(#loss)
  %logp = torch.aten._log_softmax %l2, %int1, %false : !torch.vtensor<[8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[8,16],f32> loc(#loss)
  %out, %tw = torch.aten.nll_loss_forward %logp, %tgt, %none, %int2, %int-100 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32> loc(#loss)
  %sum = "sp.all_reduce"(%out) {group = "sp", op = "sum"} : (!torch.vtensor<[],f32>) -> !torch.vtensor<[],f32> loc(#loss)
  %cnt = "sp.all_reduce"(%tw) {group = "sp", op = "sum"} : (!torch.vtensor<[],f32>) -> !torch.vtensor<[],f32> loc(#loss)
  %loss = torch.aten.div.Tensor %sum, %cnt : !torch.vtensor<[],f32>, !torch.vtensor<[],f32> -> !torch.vtensor<[],f32> loc(#loss)
  %g = torch.aten.ones_like %loss, %none, %none, %none, %false, %int1 : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[],f32> loc(#loss)
  %dlogp = torch.aten.nll_loss_backward %g, %logp, %tgt, %none, %int1, %int-100, %cnt : !torch.vtensor<[],f32>, !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[8,16],f32> loc(#loss)
  %dx = torch.aten._log_softmax_backward_data %dlogp, %logp, %int1, %int6 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32> loc(#loss)
  %d3 = torch.aten.view %dx, %s2x4x16 : !torch.vtensor<[8,16],f32>, !torch.list<int> -> !torch.vtensor<[2,4,16],f32> loc(#loss)
  %d2 = torch.aten.view %d3, %s8x16 : !torch.vtensor<[2,4,16],f32>, !torch.list<int> -> !torch.vtensor<[8,16],f32> loc(#loss)
  %dt = torch.aten.t %d2 : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[16,8],f32> loc(#loss)
  %dw = torch.aten.mm %dt, %h : !torch.vtensor<[16,8],f32>, !torch.vtensor<[8,4],f32> -> !torch.vtensor<[16,4],f32> loc(#head)
  %wtt = torch.aten.t %wt : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[16,4],f32> loc(#head)
  %dh = torch.aten.mm %d2, %wtt : !torch.vtensor<[8,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[8,4],f32> loc(#loss)
  %dh3 = torch.aten.view %dh, %s2x4x4 : !torch.vtensor<[8,4],f32>, !torch.list<int> -> !torch.vtensor<[2,4,4],f32> loc(#loss)
  return %loss, %dw, %dh3 : !torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[2,4,4],f32>
}
// -----
// The logits have another reader: tiling would keep them whole anyway, so the chain is left alone.
// CHECK-LABEL: func.func @logits_read_twice(
// CHECK:         torch.aten._log_softmax {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK-NOT:     torch.aten.slice.Tensor
// CHECK:         return
func.func @logits_read_twice(%w: !torch.vtensor<[16,4],f32>, %h: !torch.vtensor<[8,4],f32>, %tgt: !torch.vtensor<[8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[],f32>) attributes {sp.args = ["param:w", "input:h", "input:labels"], sp.results = ["loss", "z"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int6 = torch.constant.int 6
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32>
  %logp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[8,16],f32>
  %out, %tw = torch.aten.nll_loss_forward %logp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %z = torch.aten.sum %logits, %none : !torch.vtensor<[8,16],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %out, %z : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
}
// -----
// Forward only, a mean loss (no sp-partition-sequence before): the sum of the chunk sums over the
// sum of the chunk weights.
// CHECK-LABEL: func.func @forward_only_mean(
// CHECK-NOT:     vtensor<[8,16]
// CHECK-COUNT-4: torch.aten.nll_loss_forward {{.*}}, %int2{{[_0-9]*}}, %int-100 : !torch.vtensor<[2,16],f32>
// CHECK:         %[[S:[0-9]+]] = torch.aten.add.Tensor
// CHECK:         %[[C:[0-9]+]] = torch.aten.add.Tensor
// CHECK:         %[[M:[0-9]+]] = torch.aten.div.Tensor %[[S]], %[[C]]
// CHECK:         return %[[M]], %[[C]]
func.func @forward_only_mean(%w: !torch.vtensor<[16,4],f32>, %h: !torch.vtensor<[8,4],f32>, %tgt: !torch.vtensor<[8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[],f32>) attributes {sp.args = ["param:w", "input:h", "input:labels"], sp.results = ["loss", "count"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int6 = torch.constant.int 6
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32>
  %logp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[8,16],f32>
  %out, %tw = torch.aten.nll_loss_forward %logp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  return %out, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
}
// -----
// The logits gradient has a reader the pass does not split (a bias gradient, sum over tokens):
// left alone.
// CHECK-LABEL: func.func @unsupported_gradient_reader(
// CHECK:         torch.aten._log_softmax {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK:         torch.aten._log_softmax_backward_data {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK-NOT:     torch.aten.slice.Tensor
// CHECK:         return
func.func @unsupported_gradient_reader(%w: !torch.vtensor<[16,4],f32>, %h: !torch.vtensor<[8,4],f32>, %tgt: !torch.vtensor<[8],si64>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[16],f32>) attributes {sp.args = ["param:w", "input:h", "input:labels"], sp.results = ["loss", "grad:w", "grad:b"]} {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int6 = torch.constant.int 6
  %int-100 = torch.constant.int -100
  %false = torch.constant.bool false
  %none = torch.constant.none
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32>
  %logp = torch.aten._log_softmax %logits, %int1, %false : !torch.vtensor<[8,16],f32>, !torch.int, !torch.bool -> !torch.vtensor<[8,16],f32>
  %out, %tw = torch.aten.nll_loss_forward %logp, %tgt, %none, %int1, %int-100 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int -> !torch.vtensor<[],f32>, !torch.vtensor<[],f32>
  %g = torch.aten.ones_like %out, %none, %none, %none, %false, %int1 : !torch.vtensor<[],f32>, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.int -> !torch.vtensor<[],f32>
  %dlogp = torch.aten.nll_loss_backward %g, %logp, %tgt, %none, %int1, %int-100, %tw : !torch.vtensor<[],f32>, !torch.vtensor<[8,16],f32>, !torch.vtensor<[8],si64>, !torch.none, !torch.int, !torch.int, !torch.vtensor<[],f32> -> !torch.vtensor<[8,16],f32>
  %dx = torch.aten._log_softmax_backward_data %dlogp, %logp, %int1, %int6 : !torch.vtensor<[8,16],f32>, !torch.vtensor<[8,16],f32>, !torch.int, !torch.int -> !torch.vtensor<[8,16],f32>
  %dt = torch.aten.t %dx : !torch.vtensor<[8,16],f32> -> !torch.vtensor<[16,8],f32>
  %dw = torch.aten.mm %dt, %h : !torch.vtensor<[16,8],f32>, !torch.vtensor<[8,4],f32> -> !torch.vtensor<[16,4],f32>
  %dims = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %db = torch.aten.sum.dim_IntList %dx, %dims, %false, %none : !torch.vtensor<[8,16],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[16],f32>
  return %out, %dw, %db : !torch.vtensor<[],f32>, !torch.vtensor<[16,4],f32>, !torch.vtensor<[16],f32>
}
// -----
// No loss at all: nothing to do.
// CHECK-LABEL: func.func @no_loss(
// CHECK:         torch.aten.mm {{.*}} -> !torch.vtensor<[8,16],f32>
// CHECK-NOT:     torch.aten.slice.Tensor
func.func @no_loss(%w: !torch.vtensor<[16,4],f32>, %h: !torch.vtensor<[8,4],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:w", "input:h"], sp.results = ["loss"]} {
  %none = torch.constant.none
  %wt = torch.aten.t %w : !torch.vtensor<[16,4],f32> -> !torch.vtensor<[4,16],f32>
  %logits = torch.aten.mm %h, %wt : !torch.vtensor<[8,4],f32>, !torch.vtensor<[4,16],f32> -> !torch.vtensor<[8,16],f32>
  %z = torch.aten.sum %logits, %none : !torch.vtensor<[8,16],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %z : !torch.vtensor<[],f32>
}
