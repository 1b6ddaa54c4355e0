// RUN: not %autosp-opt %s --pass-pipeline='builtin.module(sp-plan-memory)' 2>&1 | FileCheck %s
// CHECK: error: sp-plan-memory: sp-plan-memory runs after sp-plan-remat (needs @forward and @backward)
func.func @train_step() {
  return
}
