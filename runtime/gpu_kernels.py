"""The fused kernels' GPU objects (kernels/<arch>/, compiled ahead of time by the compiler's codegen),
loaded and launched with no Triton and no MLIR: the CUDA driver through cuda-bindings, HIP through
ctypes on libamdhip64 (both imported only when a GPU object is first launched).

A kernel runs from its object when the run device is a GPU whose architecture (sm_90, gfx942, ...)
the artifact has a kernels/<arch>/launch.json for and that file gives the kernel an object; anywhere
else (the CPU, another architecture, a kernel codegen could not express) the executor runs the ATen
ops the kernel replaced, and this module says so once per reason.

Launch ABI of a Triton (3.6) kernel: its arguments (runtime/artifact.py's launch_args: a pointer per
input, read through its strides, a view as it is where its last dim is unit-stride, else a contiguous
copy; a pointer per output, contiguous, torch-allocated on the run device; every input's strides but
the last, i64), then two scratch pointers (global, profile: 0 when
their sizes are 0); block = num_warps x warp_size threads; dynamic shared memory = `shared`; on torch's
current stream."""
from __future__ import annotations

import ctypes
import json
import logging
import os
from typing import Any, Callable, Sequence

import torch

from .artifact import DTYPES, Artifact

log = logging.getLogger("autosp")


def arch(device: torch.device) -> str | None:
    """The device's architecture as the artifact names its folders: sm_<major><minor> (CUDA) or the
    gfx name (ROCm); None off a GPU."""
    if device.type != "cuda":
        return None
    if torch.version.hip:
        return torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def pack(arg_types: list[str], args: list[int], scratch: tuple[int, int]) -> tuple[Any, ctypes.Array]:
    """(what must stay alive until the launch returns, the void** array cuLaunchKernel /
    hipModuleLaunchKernel take): one 64-bit value per argument (a pointer, or an i64 stride), then
    the two scratch pointers."""
    if len(arg_types) != len(args) or not all(t.startswith("*") or t == "i64" for t in arg_types):
        raise ValueError(f"a fused kernel takes {len(arg_types)} pointers and strides ({arg_types}), got {len(args)}")
    values = [ctypes.c_int64(a) if t == "i64" else ctypes.c_uint64(a) for t, a in zip(arg_types, args)]
    values += [ctypes.c_uint64(p) for p in scratch]
    return values, (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])


def operands(inputs: list[torch.Tensor]) -> tuple[list[torch.Tensor], list[int]]:
    """(the tensors a kernel object reads: each input as it is where its last dim is unit-stride, else
    a contiguous copy; their strides but the last, the arguments launch_args declares)."""
    xs = [x if x.dim() == 0 or x.stride(-1) == 1 or x.shape[-1] == 1 else x.contiguous() for x in inputs]
    return xs, [n for x in xs for n in x.stride()[:-1]]


class _Cuda:
    """The CUDA driver API, in the primary context (the one torch uses)."""

    def __init__(self, index: int):
        from cuda.bindings import driver
        self.cu = driver
        self._ok(driver.cuInit(0))
        self._ok(driver.cuCtxSetCurrent(self._ok(driver.cuDevicePrimaryCtxRetain(self._ok(driver.cuDeviceGet(index))))))

    def _ok(self, res):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"CUDA driver error {int(err)} ({self.cu.cuGetErrorName(err)[1]})")
        return rest[0] if len(rest) == 1 else None

    def load(self, image: bytes, symbol: str):
        return self._ok(self.cu.cuModuleGetFunction(self._ok(self.cu.cuModuleLoadData(image)), symbol.encode()))

    def launch(self, fn, grid: list[int], block: int, shared: int, stream: int, params: ctypes.Array) -> None:
        self._ok(self.cu.cuLaunchKernel(fn, *grid, block, 1, 1, shared, stream, ctypes.addressof(params), 0))


class _Hip:
    """HIP's module API through ctypes (hipModuleLoadData, hipModuleLaunchKernel)."""

    def __init__(self, index: int):
        self.h = ctypes.CDLL(os.environ.get("AUTOSP_HIP_LIBRARY", "libamdhip64.so"))
        self._ok(self.h.hipSetDevice(index))
        self.images: list[ctypes.Array] = []   # a loaded module's image stays alive with it

    def _ok(self, err: int) -> None:
        if err:
            self.h.hipGetErrorString.restype = ctypes.c_char_p
            raise RuntimeError(f"HIP error {err} ({self.h.hipGetErrorString(err).decode()})")

    def load(self, image: bytes, symbol: str):
        module, fn = ctypes.c_void_p(), ctypes.c_void_p()
        self.images.append(ctypes.create_string_buffer(image, len(image)))
        self._ok(self.h.hipModuleLoadData(ctypes.byref(module), self.images[-1]))
        self._ok(self.h.hipModuleGetFunction(ctypes.byref(fn), module, symbol.encode()))
        return fn

    def launch(self, fn, grid: list[int], block: int, shared: int, stream: int, params: ctypes.Array) -> None:
        u = ctypes.c_uint
        self._ok(self.h.hipModuleLaunchKernel(fn, *map(u, grid), u(block), u(1), u(1), u(shared),
                                              ctypes.c_void_p(stream), params, None))


class Launcher:
    """One kernel's object, loaded on one device: called as the kernel's fallback is, on tensors."""

    def __init__(self, entry: dict, kernel: dict, backend, fn, stream: Callable[[torch.device], int]):
        self.entry, self.kernel, self.backend, self.fn, self.stream = entry, kernel, backend, fn, stream

    def __call__(self, *inputs: torch.Tensor, into: list[int] | None = None) -> tuple[torch.Tensor, ...]:
        """into: per result, the operand it is written into (the plan's sp.in_place; the operand dies at
        this call), or -1: a new tensor. A block loads all it reads before it stores, each element
        stored where its donor's element was read, so an operand of the result's shape is safe to write."""
        e, device = self.entry, inputs[0].device
        outs = results(inputs, self.kernel["results"], into, device)
        programs = e["grid"][0] * e["grid"][1] * e["grid"][2]
        scratch = [torch.empty(programs * size, dtype=torch.uint8, device=device) if size else None
                   for size in (e["global_scratch_size"], e["profile_scratch_size"])]
        xs, strides = operands(inputs)
        args = [t.data_ptr() for t in (*xs, *outs)] + strides
        keep, params = pack(e["arg_types"], args, tuple(s.data_ptr() if s is not None else 0 for s in scratch))
        self.backend.launch(self.fn, e["grid"], e["num_warps"] * e["warp_size"], e["shared"], self.stream(device),
                            params)
        return tuple(outs)


def results(inputs: Sequence[torch.Tensor], specs: list[dict], into: list[int] | None,
            device: torch.device) -> list[torch.Tensor]:
    """A kernel's (contiguous) results: each written into operand into[j] where it can take it (its
    shape, dtype, contiguous), else a new tensor."""
    out = []
    for j, r in enumerate(specs):
        k, dtype = into[j] if into else -1, DTYPES[r["dtype"]]
        x = inputs[k] if k >= 0 else None
        ok = x is not None and x.is_contiguous() and list(x.shape) == r["shape"] and x.dtype == dtype
        out.append(x if ok else torch.empty(r["shape"], dtype=dtype, device=device))
    return out


def _current_stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


class GpuObjects:
    """The artifact's GPU objects: launcher(kernel, device) gives a Launcher, or None where the ATen ops
    run instead (said once per reason)."""

    def __init__(self, artifact: Artifact, backend: Callable[[torch.device], Any] | None = None,
                 stream: Callable[[torch.device], int] = _current_stream):
        self.artifact = artifact
        self.launches = {rel.split("/")[1]: json.loads(data) for rel, data in artifact.files.items()
                         if rel.startswith("kernels/") and rel.endswith("/launch.json")}
        self.kernels = {n: k for p in artifact.program["programs"].values() for n, k in p.get("kernels", {}).items()}
        self.backend, self.stream = backend or self._backend, stream
        self.loaded: dict[tuple, Launcher | None] = {}
        self.backends: dict[torch.device, Any] = {}
        self.functions: dict[tuple, Any] = {}    # (device, object) -> its loaded function
        self.said: set[str] = set()

    @staticmethod
    def _backend(device: torch.device):
        index = device.index if device.index is not None else torch.cuda.current_device()
        return _Hip(index) if torch.version.hip else _Cuda(index)

    def _say(self, what: str) -> None:
        if what not in self.said:
            self.said.add(what)
            log.warning("autosp: %s", what)

    def launcher(self, name: str, device: torch.device) -> Launcher | None:
        key = (name, device)
        if key not in self.loaded:
            self.loaded[key] = self._load(name, device)
        return self.loaded[key]

    def _load(self, name: str, device: torch.device) -> Launcher | None:
        if not self.launches:   # compiled for no GPU: nothing to say
            return None
        have = ", ".join(sorted(self.launches))
        a = arch(device)
        if a is None or a not in self.launches:
            self._say(f"{self.artifact.path} has GPU kernels for {have}, none for {a or device.type}: the fused "
                      "kernels run as the ATen ops they replaced")
            return None
        doc = self.launches[a]
        if name not in doc["kernels"]:
            self._say(f"kernel {name} has no {a} object ({doc['fallback'].get(name, 'not compiled')}): it runs as "
                      "the ATen ops it replaced")
            return None
        entry = doc["kernels"][name]
        if device not in self.backends:
            self.backends[device] = self.backend(device)
        backend, obj = self.backends[device], (device, entry["object"])
        if obj not in self.functions:   # kernels of one body share an object
            self.functions[obj] = backend.load(self.artifact.read(f"kernels/{a}/{entry['object']}"), entry["symbol"])
        return Launcher(entry, self.kernels[name], backend, self.functions[obj], self.stream)
