"""Codegen: a fused kernel (sp-fuse's kernel function, as the host lowering gives it: the ATen ops it
replaced, over registers) -> the source of one `@triton.jit` function.

Why Triton source and not TTIR: the generated text is readable next to program.mlir, runs under
Triton's interpreter (TRITON_INTERPRET=1) on a CPU for the numerics tests, and `triton.compile`
takes it to cubin / hsaco for any target without a GPU.

The kernel's domain is its largest shape S = [rows..., N] (every value of a kernel is S, one value
per row [rows..., 1], or broadcast into S: sp-fuse's contract). A program instance computes a block
of BLOCK_R rows x BLOCK_N columns, BLOCK_N = N rounded up to a power of two (a row reduction is
one tl.sum / tl.max), BLOCK_R so that a block holds ~2K elements. All shapes are static: the offsets
of an operand broadcast into S are expressions of its strides (arguments, the last dim's unit: views
of the leading dims need no copy), outputs are contiguous. Values are computed in fp32; an explicit cast
(autocast's) rounds to its dtype; outputs are rounded once, at the store. ATen rounds bf16 after
every op instead, hence the tolerance the numerics test argues for. Last-dim pieces (RoPE's halves)
are expressions of their column, placed where the cat puts them: an input loaded at the shifted
column, a value the kernel computes evaluated again there from its definition.
"""
from __future__ import annotations

import importlib.util
import itertools
import math
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

import torch

from autosp.passes.ops import MAX_KERNEL_ROW
from autosp.runtime.artifact import POINTER_TYPES as POINTER, launch_args, resolve
from autosp.runtime.gpu_kernels import operands, results as result_storage

_REF = re.compile(r"\bv(\d+)\b|\bc\b")   # a register or the column in an expression
BLOCK_ELEMENTS = 2048     # rows per block: BLOCK_R x BLOCK_N ~ this many elements
TL_DTYPE = {"float32": "tl.float32", "bfloat16": "tl.bfloat16", "float16": "tl.float16", "bool": "tl.int1",
            "int64": "tl.int64", "int32": "tl.int32", "uint8": "tl.uint8", "int8": "tl.int8"}
FLOATS = ("float32", "bfloat16", "float16")
ROW_REDUCTIONS = {"aten.sum.dim_IntList": "sum", "aten.mean.dim": "mean", "aten.amax.default": "max"}
ONE_HOT = "aten.nll_loss_backward.default"
CASTS = ("_to_copy", "to.dtype", "prims.convert_element_type")
UNARY = {"neg": "(-{0})", "rsqrt": "tl.math.rsqrt({0})", "sqrt": "tl.sqrt({0})", "exp": "tl.exp({0})",
         "log": "tl.log({0})", "cos": "tl.cos({0})", "sin": "tl.sin({0})", "sigmoid": "tl.sigmoid({0})",
         "tanh": "(2.0 * tl.sigmoid(2.0 * {0}) - 1.0)", "silu": "({0} * tl.sigmoid({0}))",
         "relu": "tl.maximum({0}, 0.0)", "abs": "tl.abs({0})", "reciprocal": "(1.0 / {0})",
         "erf": "tl.math.erf({0})", "square": "({0} * {0})", "logical_not": "({0} == 0)",
         "bitwise_not": "(~{0})", "expand": "{0}"}


# autospc's target names -> (backend, arch, warp size, the artifact's folder: the device's own name for its
# architecture, as the runtime reads it from torch; the object's file extension)
TARGETS = {"cuda:90": ("cuda", 90, 32, "sm_90", "cubin"), "cuda:80": ("cuda", 80, 32, "sm_80", "cubin"),
           "hip:gfx942": ("hip", "gfx942", 64, "gfx942", "hsaco"), "hip:gfx90a": ("hip", "gfx90a", 64, "gfx90a", "hsaco")}


class Unsupported(Exception):
    """A kernel codegen cannot express: it has no GPU object, the runtime runs its ATen ops."""


@dataclass
class TritonKernel:
    name: str
    source: str                 # a module defining one @triton.jit function `name`
    signature: dict[str, str]   # argument -> Triton type (pointers only)
    grid: int                   # program instances (1-D)
    num_warps: int
    block: tuple[int, int]      # BLOCK_R, BLOCK_N
    domain: list[int] = field(default_factory=list)


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def domain(kernel: dict) -> list[int]:
    """The kernel's largest value shape: every other value is it, its rows, or broadcast into it."""
    shapes = [a["shape"] for a in kernel["args"]] + [s for i in kernel["instructions"] for s in i["shapes"] if s is not None]
    return max(shapes, key=lambda s: (math.prod(s), len(s)))


def _named(inst: dict) -> dict[str, Any]:
    """The instruction's operands by schema name, defaults filled in: ("r", reg) or ("c", value)."""
    schema = resolve(inst["op"])._schema
    given = list(inst["args"]) + [None] * (len(schema.arguments) - len(inst["args"]))
    out = {}
    for a, enc in zip(schema.arguments, given):
        enc = inst.get("kwargs", {}).get(a.name, enc)
        out[a.name] = ("c", a.default_value if a.has_default_value() else None) if enc is None else _decode(enc)
    return out


def _decode(enc: dict) -> tuple[str, Any]:
    if "r" in enc:
        return "r", enc["r"]
    if "c" in enc:
        return "c", enc["c"]
    if "dtype" in enc:
        return "c", enc["dtype"]
    if "l" in enc and all("c" in e for e in enc["l"]):
        return "c", [e["c"] for e in enc["l"]]
    if set(enc) & {"memory_format", "layout", "device"}:   # a kernel's outputs are contiguous, on its device
        return "c", None
    raise Unsupported(f"operand {enc}")


class _Writer:
    def __init__(self, kernel: dict, name: str):
        self.k, self.name = kernel, name
        self.S = domain(kernel)
        self.rows = math.prod(self.S[:-1]) if self.S else 1
        self.N = self.S[-1] if self.S else 1
        self.BN = _pow2(self.N)
        if self.BN > MAX_KERNEL_ROW:   # a row reduction is a single tl.sum over one block
            raise Unsupported(f"rows of {self.N} elements exceed one block ({MAX_KERNEL_ROW})")
        self.BR = min(_pow2(self.rows), max(1, BLOCK_ELEMENTS // self.BN))
        self.lines: list[str] = []
        self.pieces: dict[int, tuple[str, int]] = {}   # register -> (expression of @COL@, width)
        self.lists: dict[int, list[tuple[str, int]]] = {}   # a split's pieces
        self.defs: dict[int, str] = {}     # register -> its expression of other registers and the column c
        self.shapes: dict[int, list[int]] = {}   # computed register -> shape
        # the inputs read as one value per row: the one-hot's target (one class per row, [rows])
        self.row_values = {i["args"][2]["r"] for i in kernel["instructions"]
                           if i["op"] == ONE_HOT and "r" in i["args"][2]}
        if not self.row_values <= set(range(len(kernel["args"]))) or \
                any(kernel["args"][i]["shape"] != [self.rows] for i in self.row_values):
            raise Unsupported("a one-hot target that is not an input of one value per row")

    # ------------------------------------------------------------------ operands
    def _offset(self, i: int) -> tuple[str, str]:
        """(offset expression, mask) of input i broadcast into the domain, read through its strides."""
        shape = self.k["args"][i]["shape"]
        if i in self.row_values:   # one value per row, [rows], unit-stride (launch_args): at its row
            return "r", "rmask"
        if shape and shape[-1] not in (1, self.N):
            raise Unsupported(f"operand of shape {shape} does not broadcast into {self.S}")
        rows = self._row_offset(i)
        terms, masks = ([rows], ["rmask"]) if rows != "0" else ([], [])
        if self.S and shape and shape[-1] != 1:
            terms.append("c")
            masks.append("cmask")
        return " + ".join(terms) or "0", " & ".join(masks)

    def _row_offset(self, i: int) -> str:
        """The offset of a row's first element in input i, broadcast into the domain's rows: a row's
        index in each dim of the domain times the input's stride there (`in<i>_s<dim>`, an argument;
        the last dim's is 1, see launch_args)."""
        S, shape = self.S, self.k["args"][i]["shape"]
        if len(shape) > len(S) or any(t not in (1, s) for t, s in zip(reversed(shape[:-1]), reversed(S[:-1]))):
            raise Unsupported(f"operand of shape {shape} does not broadcast into {S}")
        lead = len(S) - len(shape)
        terms = [f"((r // {math.prod(S[d + 1:-1])}) % {S[d]}) * in{i}_s{d - lead}"
                 for d in range(lead, len(S) - 1) if shape[d - lead] != 1]
        return " + ".join(terms) or "0"

    def _shape(self, reg: int) -> list[int]:
        return self.k["args"][reg]["shape"] if reg < len(self.k["args"]) else self.shapes[reg]

    def _piece(self, x: int, start: int, width: int) -> tuple[str, int]:
        """A last-dim piece of register x from column `start`: an expression of its column, @COL@."""
        return self._at(x, f"(@COL@ + {start})"), width

    def _at(self, reg: int, col: str) -> str:
        """Register reg at column `col` instead of c: an input loaded there, a value computed in the
        kernel evaluated again there from its definition (a row's value is the same at every column)."""
        shape = self._shape(reg)
        if not shape or shape[-1] == 1 or reg in self.row_values:
            return f"v{reg}"
        if reg < len(self.k["args"]):
            spec = self.k["args"][reg]
            value = f"tl.load(in{reg} + {self._row_offset(reg)} + {col}, " \
                    f"mask=rmask & ({col} >= 0) & ({col} < {shape[-1]}), other=0)"
            return value + (".to(tl.float32)" if spec["dtype"] in FLOATS else "")
        if reg not in self.defs:
            raise Unsupported("a piece of a piece")
        return _REF.sub(lambda m: col if m.group(0) == "c" else self._at(int(m.group(1)), col), self.defs[reg])

    def _load(self, i: int, spec: dict) -> None:
        off, mask = self._offset(i)
        v = f"tl.load(in{i} + {off}" + (f", mask={mask}, other=0)" if mask else ")")
        self.emit(f"v{i} = {v}" + (".to(tl.float32)" if spec["dtype"] in FLOATS else ""))

    def define(self, reg: int, expr: str) -> None:
        self.defs[reg] = expr
        self.emit(f"v{reg} = {expr}")

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def x(self, operand: tuple[str, Any]) -> str:
        kind, v = operand
        if kind == "r":
            if v in self.pieces:
                raise Unsupported("a piece of an input outside a cat")
            return f"v{v}"
        if isinstance(v, bool):
            return str(v)
        if isinstance(v, (int, float)):
            return repr(float(v))
        raise Unsupported(f"constant {v!r}")

    # ------------------------------------------------------------------ ops
    def piece_op(self, inst: dict) -> bool:
        """Pieces (RoPE's halves) are expressions of their column, evaluated where a cat puts them."""
        op, out = inst["op"], inst["out"]
        if op == "prim.unpack":
            for r, piece in zip(out, self.lists[inst["args"][0]["r"]]):
                self.pieces[r] = piece
            return True
        if op == "aten.cat.default":   # pieces side by side along the last dim
            if any(e.get("r") not in self.pieces for e in inst["args"][0]["l"]):
                raise Unsupported("a cat of values that are not pieces of an input")
            pieces = [self.pieces[e["r"]] for e in inst["args"][0]["l"]]
            starts = list(itertools.accumulate((w for _, w in pieces), initial=0))
            value = pieces[-1][0].replace("@COL@", f"(c - {starts[-2]})")
            for (expr, width), begin in reversed(list(zip(pieces[:-1], starts))):
                value = f"tl.where(c < {begin + width}, {expr.replace('@COL@', f'(c - {begin})')}, {value})"
            self.define(out[0], value)
            return True
        a = _named(inst)
        if op == "aten.slice.Tensor":
            x = a["self"][1]
            begin, end, _ = slice(a["start"][1], a["end"][1]).indices(self._shape(x)[-1])
            self.pieces[out[0]] = self._piece(x, begin, end - begin)
            return True
        if op == "aten.split.Tensor":
            x, size = a["self"][1], a["split_size"][1]
            n = self._shape(x)[-1]
            self.lists[out[0]] = [self._piece(x, j, min(size, n - j)) for j in range(0, n, size)]
            return True
        tensors = [v for v in a.values() if v[0] == "r"]
        if len(tensors) == 1 and tensors[0][1] in self.pieces:   # an elementwise op of a piece
            expr, width = self.pieces[tensors[0][1]]
            short = op.removeprefix("aten.").removesuffix(".default")
            if short in CASTS:
                self.pieces[out[0]] = (self._cast(expr, a["dtype"][1] or inst["dtypes"][0]), width)
            elif short in UNARY:
                self.pieces[out[0]] = (UNARY[short].format(expr), width)
            else:
                raise Unsupported(f"{op} of a piece")
            return True
        return False

    @staticmethod
    def _cast(expr: str, dtype: str) -> str:
        """Round as ATen's cast does, then go on in fp32."""
        if dtype not in TL_DTYPE:
            raise Unsupported(f"cast to {dtype}")
        return f"{expr}.to({TL_DTYPE[dtype]})" + (".to(tl.float32)" if dtype in FLOATS else "")

    def op(self, inst: dict) -> str:
        """The expression of one instruction's result."""
        op, a = inst["op"], _named(inst)
        x = self.x
        names = list(a)
        first = x(a[names[0]])
        if op in ROW_REDUCTIONS:
            kind = ROW_REDUCTIONS[op]
            full = f"tl.broadcast_to({first}, [BLOCK_R, BLOCK_N])"
            if kind == "max":
                return f"tl.max(tl.where(cmask, {full}, float('-inf')), axis=1)[:, None]"
            total = f"tl.sum(tl.where(cmask, {full}, 0.0), axis=1)[:, None]"
            return total if kind == "sum" else f"({total} / {float(self.N)!r})"
        short = op.removeprefix("aten.").removesuffix(".default")
        if short in UNARY:
            return UNARY[short].format(first)
        row_sum = "tl.sum(tl.where(cmask, tl.broadcast_to({0}, [BLOCK_R, BLOCK_N]), 0.0), axis=1)[:, None]".format
        if short == "_log_softmax":   # x - max - log(sum(exp(x - max))), as ATen computes it
            top = f"tl.max(tl.where(cmask, {first}, float('-inf')), axis=1)[:, None]"
            return f"({first} - {top} - tl.log({row_sum(f'tl.exp({first} - {top})')}))"
        if short == "_log_softmax_backward_data":   # g - exp(out) * sum(g)
            return f"({first} - tl.exp({x(a['output'])}) * {row_sum(first)})"
        if op == ONE_HOT:   # -grad (/ total_weight: mean) at each row's target class unless ignored
            t, scale = x(a["target"]), f"{first} / {x(a['total_weight'])}" if a["reduction"][1] == 1 else first
            return f"tl.where((c == {t}) & ({t} != {int(a['ignore_index'][1])}), -({scale}), 0.0)"
        if short in CASTS:
            return self._cast(first, a["dtype"][1] or inst["dtypes"][0])
        if short in ("ones_like", "zeros_like", "empty_like"):
            return f"(tl.zeros([BLOCK_R, BLOCK_N], tl.float32) + {1.0 if short == 'ones_like' else 0.0})"
        # a tensor or a number (clamp's bound may be None, gelu's `approximate` a string)
        second = x(a[names[1]]) if len(names) > 1 and (a[names[1]][0] == "r" or isinstance(
            a[names[1]][1], (int, float))) else None
        alpha = lambda: "" if a.get("alpha", ("c", 1))[1] == 1 else f" * {x(a['alpha'])}"  # noqa: E731
        binary = {"add.Tensor": f"({first} + {second}{alpha()})", "add.Scalar": f"({first} + {second}{alpha()})",
                  "sub.Tensor": f"({first} - {second}{alpha()})", "sub.Scalar": f"({first} - {second}{alpha()})",
                  "rsub.Scalar": f"({second} - {first}{alpha()})",
                  "mul.Tensor": f"({first} * {second})", "mul.Scalar": f"({first} * {second})",
                  "div.Tensor": f"({first} / {second})", "div.Scalar": f"({first} / {second})",
                  "maximum": f"tl.maximum({first}, {second})", "minimum": f"tl.minimum({first}, {second})",
                  "logical_and": f"(({first} != 0) & ({second} != 0))",
                  "logical_or": f"(({first} != 0) | ({second} != 0))"}
        for cmp, sym in (("eq", "=="), ("ne", "!="), ("gt", ">"), ("lt", "<"), ("ge", ">="), ("le", "<=")):
            binary[f"{cmp}.Scalar"] = binary[f"{cmp}.Tensor"] = f"({first} {sym} {second})"
        if short in binary:
            if short == "div.Tensor" and a.get("rounding_mode", ("c", None))[1] is not None:
                raise Unsupported("div with a rounding mode")
            return binary[short]
        if short == "pow.Tensor_Scalar":
            e = a["exponent"][1]
            powers = {1: "{0}", 2: "({0} * {0})", 3: "({0} * {0} * {0})", 0.5: "tl.sqrt({0})",
                      -0.5: "tl.math.rsqrt({0})", -1: "(1.0 / {0})", -2: "(1.0 / ({0} * {0}))"}
            if e not in powers:
                raise Unsupported(f"pow with exponent {e}")
            return powers[e].format(first)
        if short in ("fill.Scalar", "full_like"):
            return f"(tl.zeros([BLOCK_R, BLOCK_N], tl.float32) + {second})"
        if short == "where.self":
            return f"tl.where({first} != 0, {second}, {x(a[names[2]])})"
        if short in ("masked_fill.Scalar", "masked_fill.Tensor"):
            return f"tl.where({second} != 0, {x(a[names[2]])}, {first})"
        if short == "clamp":
            out = first
            if a["min"][1] is not None:
                out = f"tl.maximum({out}, {x(a['min'])})"
            if a["max"][1] is not None:
                out = f"tl.minimum({out}, {x(a['max'])})"
            return out
        if short == "silu_backward":
            s = f"tl.sigmoid({second})"
            return f"({first} * {s} * (1.0 + {second} * (1.0 - {s})))"
        if short == "sigmoid_backward":
            return f"({first} * {second} * (1.0 - {second}))"
        if short == "tanh_backward":
            return f"({first} * (1.0 - {second} * {second}))"
        if short in ("gelu", "gelu_backward"):
            return self._gelu(short, first, second, a["approximate"][1])
        if short == "threshold_backward":
            return f"tl.where({second} <= {x(a['threshold'])}, 0.0, {first})"
        if short == "native_dropout_backward":
            return f"({first} * ({second} != 0) * {x(a['scale'])})"
        if short == "leaky_relu":
            return f"tl.where({first} > 0, {first}, {first} * {x(a['negative_slope'])})"
        raise Unsupported(f"{op} has no Triton lowering")

    @staticmethod
    def _gelu(op: str, first: str, second: str | None, approximate: str) -> str:
        """gelu(x) and gelu_backward(g, x), exact (erf) or tanh-approximate, as ATen defines them."""
        x = first if op == "gelu" else second
        if approximate == "none":
            cdf = f"(0.5 * (1.0 + tl.math.erf({x} * {math.sqrt(0.5)!r})))"
            if op == "gelu":
                return f"({x} * {cdf})"
            pdf = f"(tl.exp(-0.5 * {x} * {x}) * {1 / math.sqrt(2 * math.pi)!r})"
            return f"({first} * ({cdf} + {x} * {pdf}))"
        if approximate != "tanh":
            raise Unsupported(f"gelu approximate={approximate!r}")
        k, c = math.sqrt(2 / math.pi), 0.044715
        inner = f"({k!r} * ({x} + {c!r} * {x} * {x} * {x}))"
        t = f"(2.0 * tl.sigmoid(2.0 * {inner}) - 1.0)"   # tanh
        if op == "gelu":
            return f"(0.5 * {x} * (1.0 + {t}))"
        # d/dx: 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)
        return (f"({first} * (0.5 * (1.0 + {t}) + 0.5 * {x} * (1.0 - {t} * {t}) * {k!r} * "
                f"(1.0 + {3 * c!r} * {x} * {x})))")

    # ------------------------------------------------------------------ the function
    def write(self) -> TritonKernel:
        k = self.k
        params = [name for name, _ in launch_args(k)]
        self.emit("pid = tl.program_id(0)")
        self.emit("r = pid * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]")
        self.emit("c = tl.arange(0, BLOCK_N)[None, :]")
        self.emit(f"rmask = r < {self.rows}")
        self.emit(f"cmask = c < {self.N}")
        for i, spec in enumerate(k["args"]):
            self._load(i, spec)
        for inst in k["instructions"]:
            self.shapes.update(zip(inst["out"], inst["shapes"]))
            if self.piece_op(inst):
                continue
            if len(inst["out"]) != 1:
                raise Unsupported(f"{inst['op']} gives {len(inst['out'])} results")
            self.define(inst["out"][0], self.op(inst))
        for j, (reg, spec) in enumerate(zip(k["outputs"], k["results"])):
            if spec["dtype"] not in TL_DTYPE:
                raise Unsupported(f"a {spec['dtype']} result")
            rows_only = spec["shape"] != self.S
            if rows_only and spec["shape"] != self.S[:-1] + [1]:
                raise Unsupported(f"result of shape {spec['shape']} in a kernel over {self.S}")
            shape, off, mask = ("[BLOCK_R, 1]", "r", "rmask") if rows_only else \
                ("[BLOCK_R, BLOCK_N]", f"r * {self.N} + c", "rmask & cmask")
            value = f"tl.broadcast_to(v{reg} + tl.zeros({shape}, tl.float32), {shape})" \
                if spec["dtype"] in FLOATS else f"tl.broadcast_to(v{reg}, {shape})"
            self.emit(f"tl.store(out{j} + {off}, {value}.to({TL_DTYPE[spec['dtype']]}), mask={mask})")
        for spec in k["args"] + k["results"]:
            if spec["dtype"] not in POINTER:
                raise Unsupported(f"a {spec['dtype']} tensor")
        head = [f"BLOCK_R = tl.constexpr({self.BR})", f"BLOCK_N = tl.constexpr({self.BN})", "", "",
                "@triton.jit", f"def {self.name}({', '.join(params)}):"]
        source = "\n".join(["import triton", "import triton.language as tl", "", *head, *self.lines]) + "\n"
        signature = dict(launch_args(k))
        block = self.BR * self.BN
        return TritonKernel(self.name, source, signature, grid=-(-self.rows // self.BR),
                            num_warps=4 if block <= 2048 else 8 if block <= 8192 else 16,
                            block=(self.BR, self.BN), domain=self.S)


def generate(name: str, kernel: dict) -> TritonKernel:
    """The Triton kernel of one fused kernel (host program form), or Unsupported saying why not."""
    return _Writer(kernel, name).write()


def load(tk: TritonKernel, folder: str | None = None):
    """The @triton.jit function of generated source (Triton reads a kernel's source from its file):
    under TRITON_INTERPRET=1, one that runs on CPU tensors."""
    folder = folder or tempfile.mkdtemp(prefix="autosp-triton-")
    path = os.path.join(folder, f"{tk.name}.py")
    with open(path, "w") as f:
        f.write(tk.source)
    spec = importlib.util.spec_from_file_location(f"autosp_kernel_{tk.name}_{id(tk)}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, tk.name)


def compile_object(tk: TritonKernel, target: str, folder: str) -> tuple[bytes, dict]:
    """Compile ahead of time, on this host, for one of TARGETS: (cubin | hsaco, what a launcher needs:
    the symbol, block = num_warps x warp_size threads, dynamic shared bytes, the scratch sizes Triton
    adds two pointer arguments for, the argument types)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    backend, arch, warp, _, ext = TARGETS[target]
    compiled = triton.compile(ASTSource(fn=load(tk, folder), signature=tk.signature, constexprs={}),
                              target=GPUTarget(backend, arch, warp), options={"num_warps": tk.num_warps})
    md = compiled.metadata._asdict()
    return compiled.asm[ext], {
        "symbol": md["name"], "num_warps": md["num_warps"], "warp_size": warp, "shared": md["shared"],
        "global_scratch_size": md.get("global_scratch_size") or 0, "profile_scratch_size": md.get("profile_scratch_size") or 0,
        "num_ctas": md.get("num_ctas", 1), "arg_types": list(tk.signature.values())}


def launch(fn, tk: TritonKernel, inputs: list[torch.Tensor], results: list[dict],
           into: list[int] | None = None) -> list[torch.Tensor]:
    """Run a loaded kernel on torch tensors (the interpreter's CPU tensors in the tests); into: the
    operand each result is written into, as the runtime's launcher does (gpu_kernels.results)."""
    outs = result_storage(inputs, results, into, inputs[0].device if inputs else torch.device("cpu"))
    xs, strides = operands(inputs)
    fn[(tk.grid,)](*xs, *outs, *strides, num_warps=tk.num_warps)
    return outs
