// sp-plan-memory: a kernel call (sp-fuse's) writes a result into an operand whose storage dies at it
// when their shapes and dtypes agree, as the LM head's chunked weight gradient adds each chunk's bf16
// part into its fp32 sum: the sum is written in place (sp.in_place = per result, the operand), the
// bf16 part is not (another dtype). The second call's sum is read after it: a new buffer.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' --emit=host-program | FileCheck %s --check-prefix=HOST

// Live after each op: %acc 256, %part 384 (bf16, 128 B), the first sum in %acc's storage 256 (%part
// freed), %part2 384, the second sum 512 (%part2 freed), %n 512 (768 at the op, then the first sum
// freed).
// CHECK-LABEL: func.func @backward(
// CHECK-SAME:    sp.live_peak_bytes = 768 : i64, sp.live_timeline = array<i64: 256, 384, 256, 384, 512, 512>
// CHECK:         call @backward_k0({{.*}}) {sp.in_place = array<i64: 1>}
// CHECK-NEXT:    torch.aten._to_copy
// CHECK-NEXT:    call @backward_k0({{.*}}) :
// HOST:       "op": "sp.kernel",
// HOST:       "attrs": {
// HOST-NEXT:    "name": "backward_k0",
// HOST-NEXT:    "in_place": [
// HOST-NEXT:      1
// HOST-NEXT:    ]
// HOST-NEXT:  },
// HOST:       "op": "sp.kernel",
// HOST:       "attrs": {
// HOST-NEXT:    "name": "backward_k0"
// HOST-NEXT:  },
func.func @forward(%w: !torch.vtensor<[8,8],f32>) -> !torch.vtensor<[],f32> attributes {sp.args = ["param:w"], sp.results = ["loss"]} {
  %none = torch.constant.none
  %loss = torch.aten.sum %w, %none : !torch.vtensor<[8,8],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %loss : !torch.vtensor<[],f32>
}
func.func @backward(%w: !torch.vtensor<[8,8],f32>) -> (!torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>) attributes {sp.args = ["param:w"], sp.results = ["grad:a", "grad:b", "grad:c"]} {
  %int15 = torch.constant.int 15
  %none = torch.constant.none
  %false = torch.constant.bool false
  %acc = torch.aten.mul.Tensor %w, %w : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[8,8],f32>
  %part = torch.aten._to_copy %w, %int15, %none, %none, %none, %false, %none : !torch.vtensor<[8,8],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[8,8],bf16>
  %sum = func.call @backward_k0(%part, %acc) : (!torch.vtensor<[8,8],bf16>, !torch.vtensor<[8,8],f32>) -> !torch.vtensor<[8,8],f32>
  %part2 = torch.aten._to_copy %sum, %int15, %none, %none, %none, %false, %none : !torch.vtensor<[8,8],f32>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[8,8],bf16>
  %sum2 = func.call @backward_k0(%part2, %sum) : (!torch.vtensor<[8,8],bf16>, !torch.vtensor<[8,8],f32>) -> !torch.vtensor<[8,8],f32>
  %n = torch.aten.neg %sum : !torch.vtensor<[8,8],f32> -> !torch.vtensor<[8,8],f32>
  return %sum2, %n, %w : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>
}
func.func private @backward_k0(%part: !torch.vtensor<[8,8],bf16>, %acc: !torch.vtensor<[8,8],f32>) -> !torch.vtensor<[8,8],f32> attributes {sp.kernel = {domain = array<i64: 8, 8>, ops = 2 : i64}} {
  %int1 = torch.constant.int 1
  %int6 = torch.constant.int 6
  %none = torch.constant.none
  %false = torch.constant.bool false
  %f = torch.aten._to_copy %part, %int6, %none, %none, %none, %false, %none : !torch.vtensor<[8,8],bf16>, !torch.int, !torch.none, !torch.none, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[8,8],f32>
  %s = torch.aten.add.Tensor %acc, %f, %int1 : !torch.vtensor<[8,8],f32>, !torch.vtensor<[8,8],f32>, !torch.int -> !torch.vtensor<[8,8],f32>
  return %s : !torch.vtensor<[8,8],f32>
}
