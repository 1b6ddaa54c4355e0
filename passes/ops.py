"""What autosp knows about ops, in one place: which torch-dialect and sp ops are identities, views,
elementwise, factories, random draws or collectives. The passes and the host lowering import these
tables; the runtime keeps its own allowlist (runtime/artifact.py: it owns the artifact format)."""
from __future__ import annotations

A = "torch.aten."
LIST = "torch.prim.ListConstruct"
UNPACK = "torch.prim.ListUnpack"
CONSTANT = "torch.constant."   # prefix: constants are operands, never instructions

# values are immutable: these are the same value under another name
IDENTITY = {A + n for n in ("detach", "alias", "clone", "lift_fresh_copy")}
# the same elements in another shape (row-major order kept)
RESHAPE = {A + n for n in ("view", "_unsafe_view", "reshape")}
# results alias their first operand's storage (as the runtime runs them)
VIEWS = RESHAPE | IDENTITY | {A + n for n in (
    "transpose.int", "permute", "t", "unsqueeze", "squeeze.dim", "squeeze", "expand", "slice.Tensor", "select.int",
    "split.Tensor", "split_with_sizes", "unbind.int")} | {UNPACK}
# ... and these when the dtype does not change (ATen returns the operand itself)
SAME_DTYPE_VIEWS = {A + "to.dtype"}
# a view of these is not contiguous, so a later reshape copies
STRIDED = {A + n for n in ("transpose.int", "permute", "t", "expand", "slice.Tensor", "select.int")}

# elementwise ops of one tensor operand (any others are scalars)
UNARY = {A + n for n in (
    "neg", "rsqrt", "sqrt", "exp", "log", "cos", "sin", "tanh", "sigmoid", "silu", "gelu", "relu", "abs",
    "reciprocal", "erf", "clone", "detach", "alias", "lift_fresh_copy", "_to_copy", "to.dtype",
    "fill.Scalar", "empty_like", "ones_like", "zeros_like", "full_like", "add.Scalar", "sub.Scalar",
    "rsub.Scalar", "mul.Scalar", "div.Scalar", "pow.Tensor_Scalar", "ne.Scalar", "eq.Scalar", "gt.Scalar",
    "lt.Scalar", "ge.Scalar", "le.Scalar", "logical_not", "bitwise_not", "clamp", "masked_fill.Scalar",
    "leaky_relu", "softplus", "square")} | {"torch.prims.convert_element_type"}
# elementwise ops of two or more broadcast tensor operands
BINARY = {A + n for n in (
    "add.Tensor", "sub.Tensor", "mul.Tensor", "div.Tensor", "pow.Tensor_Tensor", "maximum", "minimum",
    "where.self", "silu_backward", "gelu_backward", "sigmoid_backward", "tanh_backward",
    "threshold_backward", "eq.Tensor", "ne.Tensor", "gt.Tensor", "lt.Tensor", "ge.Tensor", "le.Tensor",
    "masked_fill.Tensor", "logical_and", "logical_or", "native_dropout_backward")}
ELEMENTWISE = UNARY | BINARY
# a copy that changes only the element type when its result has its input's shape (autocast's casts)
CAST = A + "_to_copy"
# linear in their one tensor operand: a partial (summand) value stays partial through them
PARTIAL_UNARY = {A + n for n in ("neg", "clone", "detach", "alias", "_to_copy", "mul.Scalar", "div.Scalar")}

# make a tensor from sizes and scalars alone
FACTORY = {A + n for n in ("arange", "arange.start", "arange.start_step", "zeros", "ones", "full", "empty.memory_format",
                           "scalar_tensor", "new_zeros", "new_ones", "new_empty", "new_full", "randn", "rand")}
# each rank draws its own randomness (runtime/executor.py): shard-local, and never recomputed (a
# recompute would draw anew; saved, the backward sees the forward's draws)
RANDOM = {A + "native_dropout"}
# checks of the capture with no effect on values
NO_EFFECT = {A + "_assert_tensor_metadata"}

# collectives over a group of ranks: never recomputed, identities over a group of one
COLLECTIVES = {"sp.all_to_all", "sp.all_reduce", "sp.all_gather", "sp.reduce_scatter"}
# attention over a sequence sharded across the group: K/V blocks travel around the ranks
RING_ATTENTION, RING_ATTENTION_GRAD = "sp.ring_attention", "sp.ring_attention_grad"
ATTENTION = {"sp.attention", RING_ATTENTION}   # forward attention, whatever its sharding
SHARD_SLICE = "sp.shard_slice"   # this rank's slice of a replicated value
HALO = "sp.halo"                 # neighbour exchange: still shifts in the fill value on one rank
# temporary buffers a collective needs beside its output, in multiples of the output's bytes
COLLECTIVE_STAGING = {"sp.all_to_all": 2, "sp.all_gather": 1, "sp.reduce_scatter": 2}

# what sp-fuse may put in a kernel: elementwise ops that compute (identities are register renames;
# random draws stay shard-local ATen calls; empty_like's values are undefined, so any will do), and
# expand, which inside a kernel is only a broadcast (RMSNorm's backward expands a row statistic) ...
FUSIBLE = ELEMENTWISE - IDENTITY | {A + "expand"}
# ... and reductions over the last dim with keepdim (one value per row: RMSNorm's mean, a softmax's max)
ROW_REDUCTIONS = {A + "sum.dim_IntList", A + "mean.dim", A + "amax"}
# ... and ops over whole last-dim rows whose result is the domain (the loss: log-softmax and its
# backward), by the index of their dim operand ...
ROW_OPS = {A + "_log_softmax": 1, A + "_log_softmax_backward_data": 2}
# ... and the loss gradient's one-hot rows: nll_loss_backward of a scalar gradient, mean or sum, no
# class weights (its target, one class per row, is read as a row value) ...
ONE_HOT = A + "nll_loss_backward"
# ... and last-dim pieces of a kernel's input put back together (RoPE's rotate_half): slice / split
PIECES = (A + "slice.Tensor", A + "split.Tensor")
CAT = A + "cat"
# a kernel's row, its domain's last dim, is one block of registers: codegen's limit, and sp-fuse's
MAX_KERNEL_ROW = 1 << 16
