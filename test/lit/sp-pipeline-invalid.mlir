// sp-pipeline's options are checked before any pass runs; the passes' own errors name the model line.
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{remat=auto})' 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{tile=x})' 2>&1 | FileCheck %s --check-prefix=TILE
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=0})' 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{budget=lots})' 2>&1 | FileCheck %s --check-prefix=BYTES
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{ranks=2})' 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=3})' 2>&1 | FileCheck %s --check-prefix=UNEVEN
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=4 attention=ulysses})' 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{attention=zigzag})' 2>&1 | FileCheck %s --check-prefix=SCHEME
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=2 attention=hybrid})' 2>&1 | FileCheck %s --check-prefix=HYBRID
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=4 attention=3x2})' 2>&1 | FileCheck %s --check-prefix=DEGREES
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{sp=4 attention=4x1})' 2>&1 | FileCheck %s --check-prefix=FORCED
// RUN: not %autosp-opt %S/Inputs/tiny-llama-step.mlir --pass-pipeline='builtin.module(sp-pipeline{remat=auto budget=1KiB})' 2>&1 | FileCheck %s --check-prefix=OVER

// NOBUDGET: tiny-llama-step.mlir: error: sp-pipeline: remat=auto needs budget=BYTES (e.g. budget=12GiB)
// TILE: tiny-llama-step.mlir: error: sp-pipeline: tile='x' is not auto, a number of chunks, or 0 (off)
// ZERO: tiny-llama-step.mlir: error: sp-pipeline: sp=0 is below its minimum 1 (sequence-parallel degree)
// BYTES: tiny-llama-step.mlir: error: sp-pipeline: budget='lots' is not a size (e.g. 12GiB, 500MB, 1e9)
// UNKNOWN: tiny-llama-step.mlir: error: sp-pipeline: unknown option 'ranks' (options: attention, bucket, budget, dp, length, remat, sp, tile)
// UNEVEN: error: sp-partition-sequence: sequence length 8 is not divisible by sp=3: each rank must hold the same number of tokens (try 6 or 9)
// HEADS: loc("model.layers.0.self_attn"("tiny_llama.py":62:0)): error: sp-partition-sequence: attention has 2 heads, which sp=4 does not divide (Ulysses splits heads across ranks; attention=ring or auto passes K/V blocks around the ranks instead)
// SCHEME: tiny-llama-step.mlir: error: sp-pipeline: attention='zigzag' is not one of auto, ulysses, ring, hybrid or UxR (ulysses x ring degrees, e.g. 2x4)
// HYBRID: loc("model.layers.0.self_attn"("tiny_llama.py":62:0)): error: sp-partition-sequence: attention=hybrid needs ulysses x ring = sp=2 with 1 < ulysses < 2 dividing the 2 heads; there is none
// DEGREES: tiny-llama-step.mlir: error: sp-pipeline: attention=3x2: ulysses x ring = 3 x 2 = 6, not sp=4
// FORCED: loc("model.layers.0.self_attn"("tiny_llama.py":62:0)): error: sp-partition-sequence: attention=4x1: ulysses=4 does not divide the 2 heads
// OVER: error: sp-plan-remat: no remat plan fits the budget 1.0 KiB: the smallest predicted peak is {{.*}} KiB per rank (policy sac)
