// --emit=host-program names no device: every device constant of a factory op or a copy becomes
// {"device": null}, the device of the step's inputs at run time; dtypes are named, not ScalarType codes.
// RUN: %autosp-opt %s --emit=host-program | FileCheck %s

// CHECK:      "op": "aten.arange.default"
// CHECK:      "dtype": {
// CHECK-NEXT:   "dtype": "float32"
// CHECK:      "device": {
// CHECK-NEXT:   "device": null
// CHECK-NEXT: },
// CHECK:      "op": "aten._to_copy.default"
// CHECK:      "dtype": {
// CHECK-NEXT:   "dtype": "bfloat16"
// CHECK:      "device": {
// CHECK-NEXT:   "device": null
// CHECK-NEXT: },
// CHECK:      "op": "aten.zeros.default"
// CHECK:      "device": {
// CHECK-NEXT:   "device": null
// CHECK-NEXT: },
// CHECK-NOT:  "cpu"
// CHECK-NOT:  "cuda
func.func @factories(%x: !torch.vtensor<[2,8],f32>) -> (!torch.vtensor<[8],f32>, !torch.vtensor<[2,8],bf16>, !torch.vtensor<[2,8],f32>) attributes {sp.args = ["input:x"], sp.results = ["a", "b", "c"]} {
  %int8 = torch.constant.int 8
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int6 = torch.constant.int 6
  %int15 = torch.constant.int 15
  %none = torch.constant.none
  %false = torch.constant.bool false
  %cpu = torch.constant.device "cpu"
  %cuda = torch.constant.device "cuda:0"
  %0 = torch.aten.arange %int8, %int6, %none, %cpu, %false : !torch.int, !torch.int, !torch.none, !torch.Device, !torch.bool -> !torch.vtensor<[8],f32>
  %1 = torch.aten._to_copy %x, %int15, %none, %cuda, %none, %false, %none : !torch.vtensor<[2,8],f32>, !torch.int, !torch.none, !torch.Device, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[2,8],bf16>
  %size = torch.prim.ListConstruct %int2, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
  %2 = torch.aten.zeros %size, %int6, %none, %cpu, %false : !torch.list<int>, !torch.int, !torch.none, !torch.Device, !torch.bool -> !torch.vtensor<[2,8],f32>
  return %0, %1, %2 : !torch.vtensor<[8],f32>, !torch.vtensor<[2,8],bf16>, !torch.vtensor<[2,8],f32>
}
