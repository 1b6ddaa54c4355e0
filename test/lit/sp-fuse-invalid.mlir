// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse{min_ops=0})' 2>&1 | FileCheck %s
// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse{ops=2})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// CHECK: error: sp-fuse: min_ops=0 is below its minimum 1 (the fewest ops a kernel holds; smaller regions stay ATen calls)
// UNKNOWN: error: sp-fuse: unknown option 'ops' (options: min_ops)
func.func @forward() {
  return
}
