// sp-pad-sequence{length=7}: the captured one-layer step (8 tokens) partitioned for sp=2 takes 7
// tokens; its inputs are padded at the top, input ids with 0 and labels with -100 (ignored by the
// loss), and this rank's shards are sliced from the padded inputs. The label shift stays a halo.
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-raise-attention,sp-propagate-sequence,sp-partition-sequence{sp=2},sp-pad-sequence{length=7})' | FileCheck %s
// At the captured length (and by default) the pass changes nothing.
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-raise-attention,sp-propagate-sequence,sp-partition-sequence{sp=2},sp-pad-sequence{length=8})' | FileCheck %s --check-prefix=SAME
// The named pipeline runs it right after sp-partition-sequence when given length=.
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=2 length=7})' | FileCheck %s --check-prefix=PIPE

// CHECK:       func.func @train_step({{.*}}%arg13: !torch.vtensor<[1,7],si64>, %arg14: !torch.vtensor<[1,7],si64>)
// CHECK:         %[[IDS:[0-9]+]] = torch.aten.constant_pad_nd %arg13, %{{[0-9]+}}, %int0 : !torch.vtensor<[1,7],si64>, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8],si64>
// CHECK:         %[[LAB:[0-9]+]] = torch.aten.constant_pad_nd %arg14, %{{[0-9]+}}, %int-100 : !torch.vtensor<[1,7],si64>, !torch.list<int>, !torch.int -> !torch.vtensor<[1,8],si64>
// CHECK-NEXT:    %[[LABS:[0-9]+]] = "sp.shard_slice"(%[[LAB]]) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[1,8],si64>) -> !torch.vtensor<[1,4],si64>
// CHECK-NEXT:    "sp.shard_slice"(%[[IDS]]) {dim = 1 : i64, group = "sp"} : (!torch.vtensor<[1,8],si64>) -> !torch.vtensor<[1,4],si64>
// CHECK-NOT:     constant_pad_nd
// CHECK:         "sp.halo"(%[[LABS]]) {dim = 1 : i64, fill = -1.000000e+02 : f64, group = "sp", width = 1 : i64}

// SAME:          func.func @train_step({{.*}}%arg13: !torch.vtensor<[1,8],si64>, %arg14: !torch.vtensor<[1,8],si64>)
// SAME-NOT:      constant_pad_nd

// PIPE:          func.func @forward({{.*}}: !torch.vtensor<[1,7],si64>{{.*}}: !torch.vtensor<[1,7],si64>)
// PIPE:          torch.aten.constant_pad_nd
