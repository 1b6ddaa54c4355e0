// sp-pipeline{sp= dp= remat= budget= tile= bucket=}: the default pipeline as one named pass, run end to end on
// a captured step (Inputs/tiny-llama-step.mlir: `autospc compile py:models:one_layer_llama --seq-len 8
// --batch 1 --keep-ir`, its ir/1-import.mlir). It is exactly the list of passes it names.
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=2})' > %t.named
// RUN: FileCheck %s < %t.named
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-raise-attention,sp-merge-projections,sp-propagate-sequence,sp-partition-sequence{sp=2 dp=1},sp-elide-halo,canonicalize,cse,sp-tile-sequence,sp-plan-remat{policy=sac},sp-coalesce-collectives{bucket=26214400},sp-fuse,sp-plan-memory)' > %t.listed
// RUN: diff %t.named %t.listed
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=2 remat=auto budget=1GiB tile=0})' | FileCheck %s --check-prefix=AUTO
// RUN: %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=2})' --emit=host-program | FileCheck %s --check-prefix=HOST

// Partitioned for 2 ranks, the memory plan made; one @forward and one @backward. Nothing is tiled:
// the MLP's widest value is [4, 32] fp32, 512 bytes, far below sp-tile-sequence's default floor.
// CHECK: module attributes {sp.attention_scheme = {bytes = {"ring 2" = {{.*}}, "ulysses 2" = {{.*}}}, scheme = "ulysses 2"}, sp.memory = {{{.*}}predicted_peak_bytes = {{[0-9]+}} : i64
// CHECK-SAME: sp.mesh = {dp = 1 : i64, sp = 2 : i64}
// CHECK-NOT: sp.tiles
// CHECK: func.func @forward(
// CHECK-SAME: %arg13: !torch.vtensor<[1,8],si64>, %arg14: !torch.vtensor<[1,8],si64>)
// CHECK-SAME: sp.remat = "sac"
// CHECK: "sp.shard_slice"
// CHECK: "sp.all_to_all"
// CHECK: "sp.attention"
// The label shift needs no exchange (sp-elide-halo): the whole labels are shifted, then sharded.
// CHECK-NOT: "sp.halo"
// CHECK: torch.aten.constant_pad_nd
// CHECK-NOT: "sp.halo"
// CHECK: "sp.shard_slice"
// CHECK-NOT: "sp.halo"
// CHECK: func.func @backward(
// CHECK: "sp.attention_grad"
// CHECK: "sp.all_reduce"
// The fused kernels (sp-fuse): RoPE's cos and sin of one input (siblings: one kernel, two results),
// then RMSNorm.
// CHECK: func.func private @forward_k0({{.*}} -> (!torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>) attributes {sp.kernel = {domain = array<i64: 8, 8>, ops = 2 : i64}}
// CHECK-NEXT: torch.aten.cos
// CHECK-NEXT: torch.aten.sin
// CHECK: func.func private @forward_k1({{.*}} attributes {sp.kernel = {domain = array<i64: 1, 4, 16>, ops = 6 : i64}}
// CHECK: func.func private @backward_k0(
// CHECK-NOT: func.func @train_step

// remat=auto with a roomy budget saves everything; tile=0 leaves the MLP whole.
// AUTO: module attributes {sp.attention_scheme = {{.*}}, sp.memory = {{{.*}}}, sp.mesh = {dp = 1 : i64, sp = 2 : i64}, sp.remat_auto = {budget_bytes = 1073741824 : i64, chosen = "none"
// AUTO-NOT: sp.tiles
// AUTO: sp.remat = "none"

// The host program the runtime executes.
// HOST: "format_version": 5,
// HOST-NEXT: "mesh": {
// HOST-NEXT:  "sp": 2,
// HOST-NEXT:  "dp": 1
// HOST: "forward": {
// HOST: "op": "sp.kernel",
// HOST: "op": "sp.attention",
// HOST: "backward": {
// HOST: "op": "sp.attention_grad",
