// sp-fuse on RoPE: the halves of a kernel input or of a value it computes (split + unpack, or two
// slices) put back together by a last-dim cat fuse with the multiply-adds around them; a piece read outside keeps its region ATen ops.
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse)' | FileCheck %s
// RUN: %autosp-opt %s --pass-pipeline='builtin.module(sp-fuse)' | FileCheck %s --check-prefix=BWD

// q * cos + cat(-q[4:], q[:4]) * sin is one kernel of 8 ops over [2, 8], reading q, cos and sin.
// CHECK-LABEL: func.func @forward(
// CHECK:         %[[OUT:.*]] = call @forward_k0(%arg0, %arg1, %arg2)
// The backward-style rotation of %out has a half (%hi) that exp reads outside: it stays as it is.
// CHECK-NEXT:    %[[LO:.*]] = torch.aten.slice.Tensor %[[OUT]]
// CHECK-NEXT:    %[[HI:.*]] = torch.aten.slice.Tensor %[[OUT]]
// CHECK-NEXT:    torch.aten.neg %[[LO]]
// CHECK-NEXT:    torch.prim.ListConstruct
// CHECK-NEXT:    torch.aten.cat
// CHECK-NEXT:    torch.aten.exp %[[HI]]
// CHECK-NEXT:    return
// CHECK-LABEL: func.func private @forward_k0(
// CHECK-SAME:    sp.kernel = {domain = array<i64: 2, 8>, ops = 8 : i64}
// CHECK:         %[[QC:.*]] = torch.aten.mul.Tensor %arg0, %arg1
// CHECK-NEXT:    %[[SPLIT:.*]] = torch.aten.split.Tensor %arg0
// CHECK-NEXT:    %[[H:.*]]:2 = torch.prim.ListUnpack %[[SPLIT]]
// CHECK-NEXT:    %[[N:.*]] = torch.aten.neg %[[H]]#1
// CHECK-NEXT:    %[[L:.*]] = torch.prim.ListConstruct %[[N]], %[[H]]#0
// CHECK-NEXT:    %[[ROT:.*]] = torch.aten.cat %[[L]]
// CHECK-NEXT:    %[[RS:.*]] = torch.aten.mul.Tensor %[[ROT]], %arg2
// CHECK-NEXT:    %[[R:.*]] = torch.aten.add.Tensor %[[QC]], %[[RS]]
// CHECK-NEXT:    return %[[R]]
func.func @forward(%q: !torch.vtensor<[2,8],f32>, %cos: !torch.vtensor<[8],f32>, %sin: !torch.vtensor<[8],f32>) -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,4],f32>) attributes {sp.args = ["input:q", "buffer:cos", "buffer:sin"], sp.results = ["out", "rot", "hi"]} {
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %int0 = torch.constant.int 0
  %int8 = torch.constant.int 8
  %int-1 = torch.constant.int -1
  %qc = torch.aten.mul.Tensor %q, %cos : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[2,8],f32>
  %halves = torch.aten.split.Tensor %q, %int4, %int-1 : !torch.vtensor<[2,8],f32>, !torch.int, !torch.int -> !torch.list<vtensor>
  %h:2 = torch.prim.ListUnpack %halves : !torch.list<vtensor> -> !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>
  %n = torch.aten.neg %h#1 : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  %parts = torch.prim.ListConstruct %n, %h#0 : (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) -> !torch.list<vtensor>
  %rot = torch.aten.cat %parts, %int-1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,8],f32>
  %rs = torch.aten.mul.Tensor %rot, %sin : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[2,8],f32>
  %out = torch.aten.add.Tensor %qc, %rs, %int1 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.int -> !torch.vtensor<[2,8],f32>
  %lo = torch.aten.slice.Tensor %out, %int1, %int0, %int4, %int1 : !torch.vtensor<[2,8],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
  %hi = torch.aten.slice.Tensor %out, %int1, %int4, %int8, %int1 : !torch.vtensor<[2,8],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
  %nlo = torch.aten.neg %lo : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  %back = torch.prim.ListConstruct %hi, %nlo : (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) -> !torch.list<vtensor>
  %rot2 = torch.aten.cat %back, %int1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,8],f32>
  %e = torch.aten.exp %hi : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  return %out, %rot2, %e : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,4],f32>
}

// RoPE's backward: the halves of g * sin, a value the kernel computes, are that product evaluated again
// at the halves' columns: the product joins the rotation's kernel, which reads g, sin and cos.
// BWD-LABEL: func.func @rope(
// BWD-NEXT:    %[[R:.*]] = call @rope_k0(%arg0, %arg1, %arg2)
// BWD-NEXT:    return %[[R]]
// BWD-LABEL: func.func private @rope_k0(
// BWD-SAME:    sp.kernel = {domain = array<i64: 2, 8>, ops = 8 : i64}
// BWD:         %[[P:.*]] = torch.aten.mul.Tensor %arg0, %arg1
// BWD-NEXT:    torch.aten.slice.Tensor %[[P]]
// BWD-NEXT:    torch.aten.slice.Tensor %[[P]]
func.func @rope(%g: !torch.vtensor<[2,8],f32>, %sin: !torch.vtensor<[8],f32>, %cos: !torch.vtensor<[8],f32>) -> !torch.vtensor<[2,8],f32> attributes {sp.args = ["input:g", "buffer:sin", "buffer:cos"], sp.results = ["out"]} {
  %int1 = torch.constant.int 1
  %int4 = torch.constant.int 4
  %int0 = torch.constant.int 0
  %int8 = torch.constant.int 8
  %int-1 = torch.constant.int -1
  %p = torch.aten.mul.Tensor %g, %sin : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[2,8],f32>
  %lo = torch.aten.slice.Tensor %p, %int-1, %int0, %int4, %int1 : !torch.vtensor<[2,8],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
  %hi = torch.aten.slice.Tensor %p, %int-1, %int4, %int8, %int1 : !torch.vtensor<[2,8],f32>, !torch.int, !torch.int, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
  %n = torch.aten.neg %lo : !torch.vtensor<[2,4],f32> -> !torch.vtensor<[2,4],f32>
  %l = torch.prim.ListConstruct %hi, %n : (!torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>) -> !torch.list<vtensor>
  %rot = torch.aten.cat %l, %int-1 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[2,8],f32>
  %gc = torch.aten.mul.Tensor %g, %cos : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8],f32> -> !torch.vtensor<[2,8],f32>
  %out = torch.aten.add.Tensor %gc, %rot, %int1 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[2,8],f32>, !torch.int -> !torch.vtensor<[2,8],f32>
  return %out : !torch.vtensor<[2,8],f32>
}
