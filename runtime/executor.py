"""Executes a host program: a register machine over ATen overloads and sp collectives.

The program is decoded once at load into closures. The first run (and any run that measures memory)
interprets them in a loop that checks every instruction; once checked, a run calls one generated
Python function of straight-line code, a local per register (_Straight), which spends a fraction of
the loop's time between the ops (~900 ops a step on the demo model). Nothing about sharding is
decided here: shapes, collectives and their order come from the program.

Randomness (dropout) comes from the program's own torch.Generator, made on the first draw on the
run device and seeded with torch.initial_seed() + global_rank * 0x9E3779B97F4A7C15 (mod 2**64):
each rank draws independent masks for its own shard (sequence shards and dp replicas alike), and
torch.manual_seed(s) before the first step makes a run reproducible. On rank 0 the seed is s itself,
so one rank draws the masks eager PyTorch draws right after torch.manual_seed(s)."""
from __future__ import annotations

import math
from functools import cached_property
from typing import Any, Callable, NoReturn

import torch

from . import kernels, shapes
from .artifact import ALLOWED_ATEN, DTYPE_NAMES, DTYPES, KERNEL, SP_OPS, ArtifactError, resolve
from .collectives import COLLECTIVES, CollectiveError, Mesh
from .gpu_kernels import GpuObjects
from .memory import LiveBytes
from .packing import packs, stacked
from .schema import element_limit


class ProgramError(ArtifactError, RuntimeError):
    """The program cannot run as the artifact gives it (or with the arguments it was handed)."""


# The program is functional, so a view may copy: collectives and kernels return their own strides,
# which need not match the strides the capture assumed when it chose `view` over `reshape`.
_FUNCTIONAL = {"aten.view.default": "aten.reshape.default", "aten._unsafe_view.default": "aten.reshape.default"}


def _resolve(qualified: str):
    return resolve(_FUNCTIONAL.get(qualified, qualified))


class Program:
    def __init__(self, program: dict, mesh: Mesh, name: str = "program"):
        self.program, self.name = program, name
        self.mesh = mesh
        self.device: torch.device = torch.device("cpu")
        self.generator: torch.Generator | None = None
        self.steps: list[tuple[Callable, list[tuple[int, Any]], list[int], list[int]]] = []
        self.checked = False
        self._straight: _Straight | None = None   # made at the first run after the checked one
        self.objects: GpuObjects | None = None   # the artifact's GPU objects of the kernels (gpu_kernels.py)
        # sp-fuse's kernels, run as the ATen ops they replaced
        self.kernels = {k: Kernel(body, mesh, f"kernel {k}", self.limit) for k, body in program.get("kernels", {}).items()}
        packed = packs(program)   # stacked parameters: a view of them (packing.py)
        for i, inst in enumerate(program["instructions"]):
            op = inst["op"]
            if op not in ALLOWED_ATEN and op not in SP_OPS:
                raise ArtifactError(f"program calls {op!r}, which is not in the runtime's op allowlist")
            if i in packed:   # cat(params, 0) of a group the module keeps side by side
                self.steps.append((stacked, [self._operand(inst["args"][0])], inst["out"], inst["free"]))
                continue
            self.steps.append((self._callable(inst), [self._operand(e) for e in inst["args"]],
                               inst["out"], inst["free"]))

    # ------------------------------------------------------------------ decoding
    CONST, REG, NESTED, DEVICE = range(4)

    def _operand(self, enc: dict) -> tuple[int, Any]:
        """(kind, payload): a constant, a register, a list holding registers, or the run device."""
        if "r" in enc:
            return self.REG, enc["r"]
        if "c" in enc:
            return self.CONST, enc["c"]
        if "l" in enc:
            items = [self._operand(e) for e in enc["l"]]
            if all(k == self.CONST for k, _ in items):
                return self.CONST, [v for _, v in items]
            return self.NESTED, items
        if "dtype" in enc:
            return self.CONST, DTYPES[enc["dtype"]]
        if "memory_format" in enc:
            return self.CONST, getattr(torch, enc["memory_format"])
        if "layout" in enc:
            return self.CONST, torch.strided
        if "device" in enc:
            return self.DEVICE, None
        raise ArtifactError(f"bad operand encoding {enc}")

    def _callable(self, inst: dict) -> Callable:
        op = inst["op"]
        mesh = self.mesh
        attrs = inst.get("attrs", {})
        if op == KERNEL:
            name, single, into = attrs["name"], len(inst["out"]) == 1, attrs.get("in_place")
            kernel = self.kernels[name]

            def call(*x: torch.Tensor):
                launch = self.objects.launcher(name, self.device) if self.objects is not None else None
                if launch is None:   # no GPU object here: the ATen ops it replaced, into new tensors
                    kernel.device = self.device   # its factory ops run where the program runs
                    res = kernel(*x)
                else:
                    res = launch(*x, into=into)
                return res[0] if single else res
            return call
        if op in ("sp.attention", "sp.attention_grad"):
            kernel = "attention" if op == "sp.attention" else "attention_grad"   # looked up at each call
            flags = attrs["causal"], attrs["scale"], attrs["kv_groups"], attrs.get("window", 0)
            n = 3 if op == "sp.attention" else 6   # then the optional document positions
            return lambda *x: getattr(kernels, kernel)(*x[:n], *flags, **({"doc_pos": x[n]} if len(x) > n else {}))
        if op in COLLECTIVES:
            collective = COLLECTIVES[op]
            return lambda *x: collective(mesh, attrs, *x)
        if op == "sp.shard_slice":
            return lambda x: mesh.shard_slice(x, attrs["dim"], attrs["group"])
        if op == "prim.unpack":
            return lambda xs: tuple(xs)
        if op == "aten.native_dropout.default":
            return lambda x, p, train: kernels.dropout(x, p, train, self._generator())
        fn = _resolve(op)
        kwargs = {k: self._operand(e) for k, e in inst.get("kwargs", {}).items()}
        if any(kind in (self.REG, self.NESTED) for kind, _ in kwargs.values()):
            raise ArtifactError(f"{op}: keyword operands must be constants")
        const_kw = {k: v for k, (kind, v) in kwargs.items() if kind == self.CONST}
        dev_keys = [k for k, (kind, _) in kwargs.items() if kind == self.DEVICE]
        if dev_keys:
            return lambda *a: fn(*a, **const_kw, **{k: self.device for k in dev_keys})
        return (lambda *a: fn(*a, **const_kw)) if const_kw else fn

    def _generator(self) -> torch.Generator | None:
        if self.device.type == "meta":   # shapes only: no values to draw, and torch has no meta generator
            return None
        if self.generator is None or self.generator.device != self.device:
            seed = (torch.initial_seed() + self.mesh.rank * 0x9E3779B97F4A7C15) % 2**64
            self.generator = torch.Generator(self.device).manual_seed(seed)
        return self.generator

    def generators(self) -> list[torch.Generator]:
        """The generators a run draws from (its dropout's), made on the run device now if not yet."""
        draws = any(i["op"] == "aten.native_dropout.default" for i in self.program["instructions"])
        gen = self._generator() if draws else None
        return [gen] if gen is not None else []

    # ------------------------------------------------------------------ execution
    def _value(self, regs: list, kind: int, v: Any) -> Any:
        if kind == self.REG:
            return regs[v]
        if kind == self.CONST:
            return v
        if kind == self.DEVICE:
            return self.device
        return [self._value(regs, k, x) for k, x in v]

    def run(self, args: list[torch.Tensor], memory: LiveBytes | None = None,
            together: bool = True) -> list[torch.Tensor]:
        """One run; it takes the references in `args` (the list is emptied), so an argument the
        program frees (a saved value after its last reader) is freed then, as sp-plan-memory
        plans. The first run also checks every instruction before it runs (_precheck) and every
        result after, against the declared shapes and dtypes; with `memory`,
        the live bytes of every value are tracked as the program frees them. together=False (a
        CUDA-graph capture, where nothing may synchronize): a failure only raises, and the run ends
        without the ranks' failure check; the caller agrees outside the capture (graphs.py)."""
        for spec, a in zip(self.program["args"], args):
            if list(a.shape) != spec["shape"] or DTYPE_NAMES.get(a.dtype) != spec["dtype"]:
                raise ProgramError(f"argument {spec['role']}:{spec['name']} has shape {list(a.shape)} and dtype "
                                   f"{DTYPE_NAMES.get(a.dtype)}, the program was compiled for {spec['shape']} "
                                   f"{spec['dtype']}")
        outputs = self._outputs(args, memory, together)
        if together:
            self.mesh.agree(f"the end of the {self.name}", self.device)   # no rank leaves a failed run
        return outputs

    def _outputs(self, args: list, memory: LiveBytes | None, together: bool) -> list:
        """The program's outputs for `args`, whose references it takes: through the generated code once
        checked (and not measuring), else interpreted and checked."""
        if self.checked and memory is None:
            if self._straight is None:
                self._straight = _Straight(self)
            try:
                return self._straight.run(args, self.device)
            except Exception as e:
                self._failed(self._straight.failed_at(e), e, together)
        regs: list[Any] = [None] * self.program["num_registers"]
        regs[:len(args)] = args
        if memory is not None:
            memory.adopt(args)
        args.clear()
        self._execute(regs, memory, together)
        return [regs[o] for o in self.program["outputs"]]

    def _execute(self, regs: list, memory: LiveBytes | None, together: bool) -> None:
        REG, value = self.REG, self._value
        check = not self.checked
        for idx, (fn, operands, out, free) in enumerate(self.steps):
            inputs = [regs[v] if k == REG else value(regs, k, v) for k, v in operands]
            if check:
                self._precheck(idx, inputs)
            try:
                res = fn(*inputs)
            except Exception as e:
                self._failed(idx, e, together)
            if len(out) == 1:
                regs[out[0]] = res
            else:
                for o, r in zip(out, res):
                    regs[o] = r
            if check:
                self._check(idx, res if len(out) > 1 else (res,))
            if memory is not None:
                memory.add(res)
                for f in free:
                    memory.remove(regs[f])
            for f in free:
                regs[f] = None
        self.checked = True

    def _failed(self, idx: int, e: Exception, together: bool) -> NoReturn:
        where = self._where(idx)
        if isinstance(e, CollectiveError):
            raise type(e)(f"{where}: {e}") from None
        if together:   # the other ranks fail this run too, at its end
            self.mesh.fail_run(self.program, idx, where, self.device)
        # an out-of-memory stays catchable as such: callers back off or probe lengths with it
        kind = torch.OutOfMemoryError if isinstance(e, torch.OutOfMemoryError) else ProgramError
        raise kind(f"{where}: {_line(e)}") from e

    @cached_property
    def limit(self) -> int:
        """The most elements a tensor of this program may have (schema.element_limit)."""
        return element_limit(self.program["args"])

    def _where(self, idx: int) -> str:
        inst = self.program["instructions"][idx]
        return f"instruction {idx} ({inst['op']}, {inst['loc']})"

    def _precheck(self, idx: int, inputs: list) -> None:
        """Before the first run executes an instruction: what it would give for these operands (see
        shapes.py) against what the compiler declared, and every tensor within the element limit."""
        inst = self.program["instructions"][idx]
        op, n_out, largest = inst["op"], len(inst["out"]), 0
        try:
            if op == KERNEL:
                specs = self.kernels[inst["attrs"]["name"]].specs(inputs)
            elif op in SP_OPS:
                specs = shapes.sp(op, inst.get("attrs", {}), inputs, self.mesh)
            elif op == "aten.native_dropout.default":
                specs = shapes.dropout(inputs)
            else:
                kwargs = {k: self._value([], *self._operand(e)) for k, e in inst.get("kwargs", {}).items()}
                specs, largest = shapes.aten(_resolve(op), inputs, kwargs, n_out)
        except Exception as e:   # ATen's own refusal on meta, or a shape rule's
            raise ProgramError(f"{self._where(idx)}: its operands do not fit: {_line(e)}") from None
        if len(specs) != n_out:
            raise ProgramError(f"{self._where(idx)}: gives {len(specs)} results, the program names {n_out}")
        for got, shape, dtype in zip(specs, inst["shapes"], inst["dtypes"]):
            if got is None and shape is not None:   # e.g. a forged loss: a list declared a scalar
                raise ProgramError(f"{self._where(idx)}: would produce a value that is not a tensor, the compiler "
                                   f"declared {shape} {dtype}")
            if got is None or got == shapes.BACKEND:
                continue
            self._bounded(idx, got[0])
            if shape is not None and got[0] != shape or dtype is not None and DTYPE_NAMES.get(got[1]) != dtype:
                raise ProgramError(f"{self._where(idx)}: would produce {got[0]} {DTYPE_NAMES.get(got[1])}, the "
                                   f"compiler declared {shape} {dtype}")
        if largest > self.limit:   # a list result (split)
            raise ProgramError(f"{self._where(idx)}: would make a tensor of {largest:,} elements, above the "
                               f"limit of {self.limit:,} that the program's parameters and inputs allow")

    def _bounded(self, idx: int, shape: list[int]) -> None:
        n = math.prod(shape)
        if n > self.limit:
            raise ProgramError(f"{self._where(idx)}: would make a tensor of shape {shape} ({n:,} elements), above "
                               f"the limit of {self.limit:,} that the program's parameters and inputs allow")

    def _check(self, idx: int, results) -> None:
        inst = self.program["instructions"][idx]
        for i, (r, want, dtype) in enumerate(zip(results, inst["shapes"], inst["dtypes"])):
            if inst["op"] == "sp.attention" and i == 1:
                continue  # softmax statistics: the backend's own layout
            if want is not None and (not isinstance(r, torch.Tensor) or list(r.shape) != want or
                                     dtype is not None and DTYPE_NAMES.get(r.dtype) != dtype):
                got = f"{list(r.shape)} {DTYPE_NAMES.get(r.dtype)}" if isinstance(r, torch.Tensor) else type(r).__name__
                raise ProgramError(f"{self._where(idx)} produced {got}, the compiler declared {want} {dtype}")


class Kernel(Program):
    """A kernel's fallback: the ATen ops it replaced, as a sub-program on the caller's device. Its
    intermediates live only inside the call (the memory plan counts its inputs and outputs)."""

    def __init__(self, program: dict, mesh: Mesh, name: str, limit: int):
        super().__init__(program, mesh, name)
        self.limit = limit   # the calling program's arguments bound a kernel's tensors

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self._outputs(list(inputs), None, False))

    def specs(self, inputs: list) -> list[tuple[list[int], torch.dtype]]:
        """Its declared results, once the operands are the ones it was compiled for."""
        for i, (x, a) in enumerate(zip(inputs, self.program["args"])):
            if not isinstance(x, torch.Tensor) or list(x.shape) != a["shape"] or DTYPE_NAMES.get(x.dtype) != a["dtype"]:
                got = f"{list(x.shape)} {DTYPE_NAMES.get(x.dtype)}" if isinstance(x, torch.Tensor) else type(x).__name__
                raise shapes.ShapeError(f"operand {i} is {got}, {self.name} takes {a['shape']} {a['dtype']}")
        return [(r["shape"], DTYPES[r["dtype"]]) for r in self.program["results"]]

    def _failed(self, idx: int, e: Exception, together: bool) -> NoReturn:
        raise ProgramError(f"{self._where(idx)}: {_line(e)}") from e   # the caller names its instruction


class _Straight:
    """A checked program as one generated Python function: each instruction one line calling its
    step's callable with the operands written out (registers are locals, constants and the run device
    arguments), each value dropped after its last reader as the program frees it. An exception
    names its instruction by the line it came from."""

    def __init__(self, program: Program):
        consts: list[Any] = []
        assigned = set(range(len(program.program["args"])))

        def expr(kind: int, v: Any) -> str:
            if kind == Program.REG:
                return f"r{v}" if v in assigned else "None"   # as the interpreter's unset register
            if kind == Program.DEVICE:
                return "dev"
            if kind == Program.NESTED:
                return "[" + ", ".join(expr(k, x) for k, x in v) + "]"
            consts.append(v)
            return f"C[{len(consts) - 1}]"

        lines = ["def run(A, F, C, dev):"]
        if assigned:
            lines.append("    " + "".join(f"r{i}, " for i in sorted(assigned)) + "= A")
        lines.append("    A.clear()")   # the locals hold the only references: a freed argument is freed
        self.instruction_at: dict[int, int] = {}
        for idx, (_, operands, out, free) in enumerate(program.steps):
            call = f"F[{idx}](" + ", ".join(expr(k, v) for k, v in operands) + ")"
            assigned.update(out)
            target = "".join(f"r{o}, " for o in out) if len(out) > 1 else f"r{out[0]}" if out else "_"
            lines.append(f"    {target} = {call}")
            self.instruction_at[len(lines)] = idx
            if free:
                lines.append("    " + " = ".join(f"r{f}" for f in free) + " = None")
        lines.append("    return [" + ", ".join(expr(Program.REG, o) for o in program.program["outputs"]) + "]")
        namespace: dict[str, Any] = {}
        exec(compile("\n".join(lines), f"<autosp {program.name}>", "exec"), namespace)
        self.fn, self.consts = namespace["run"], consts
        self.steps = [fn for fn, *_ in program.steps]

    def run(self, args: list, device: torch.device) -> list:
        return self.fn(args, self.steps, self.consts, device)

    def failed_at(self, e: BaseException) -> int:
        """The instruction whose line raised e."""
        tb, line = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code is self.fn.__code__:
                line = tb.tb_lineno
            tb = tb.tb_next
        return self.instruction_at[line]


def _line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
