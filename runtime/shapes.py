"""What an instruction gives for the operands it is handed, found without running it: ATen ops on
the meta device (no memory, ATen's own shape and dtype rules), the sp ops by their rules here. The
executor compares this with what the compiler declared before the first run executes an
instruction, so a malformed program fails naming the instruction, before it allocates or computes."""
from __future__ import annotations

from typing import Any

import torch

from .collectives import Mesh

META = torch.device("meta")


class ShapeError(Exception):
    pass


def to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=META)
    if isinstance(x, (list, tuple)):
        return type(x)(to_meta(v) for v in x)
    if isinstance(x, torch.device):
        return META
    return x


Spec = tuple[list[int], torch.dtype] | str | None   # None: not a tensor
BACKEND = "backend"   # a tensor whose layout is the backend's (attention's softmax statistics)

# ATen's shape rules are pure functions of the operands' shapes, strides and dtypes and of the
# constants: a program's repeated layers (and a reloaded program) are inferred once per process
_CACHE: dict[tuple, tuple[list[Spec], int] | str] = {}
_CACHE_SIZE = 1 << 16


def _key(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return tuple(x.shape), x.stride(), x.dtype
    if isinstance(x, (list, tuple)):
        return type(x), tuple(_key(v) for v in x)
    if isinstance(x, dict):
        return tuple((k, _key(v)) for k, v in x.items())
    if isinstance(x, torch.device):
        return torch.device
    return type(x), x   # constants: None, bool, int, float, str, dtype, memory_format, layout


def aten(fn: torch._ops.OpOverload, args: list, kwargs: dict, n_out: int) -> tuple[list[Spec], int]:
    """fn's results for these operands, run on meta copies (a device keyword becomes meta, so a
    factory allocates nothing): a spec per result and the element count of the largest tensor."""
    key = fn, _key(args), _key(kwargs)
    if key not in _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        try:
            res = fn(*to_meta(args), **{k: META if k == "device" else to_meta(v) for k, v in kwargs.items()})
            results = list(res) if n_out > 1 and isinstance(res, (list, tuple)) else [res]
            flat = [t for r in results for t in (r if isinstance(r, (list, tuple)) else [r])]
            _CACHE[key] = ([(list(r.shape), r.dtype) if isinstance(r, torch.Tensor) else None for r in results],
                           max((t.numel() for t in flat if isinstance(t, torch.Tensor)), default=0))
        except Exception as e:   # ATen's own refusal
            text = str(e).strip()
            _CACHE[key] = text.splitlines()[0] if text else type(e).__name__
    hit = _CACHE[key]
    if isinstance(hit, str):
        raise ShapeError(hit)
    return hit


def _tensors(xs: list, names: tuple[str, ...], rank: int | None = None) -> list[torch.Tensor]:
    for x, n in zip(xs, names):
        if not isinstance(x, torch.Tensor):
            raise ShapeError(f"operand {n} is {type(x).__name__}, not a tensor")
        if rank is not None and x.dim() != rank:
            raise ShapeError(f"operand {n} has shape {list(x.shape)}, a {rank}-d tensor is needed")
    return xs


def _dim(x: torch.Tensor, dim: int, name: str = "dim") -> int:
    if not -x.dim() <= dim < x.dim():
        raise ShapeError(f"{name}={dim} is outside the operand's {x.dim()} dimensions {list(x.shape)}")
    return dim % x.dim()


def _divide(shape: list[int], dim: int, n: int) -> list[int]:
    if shape[dim] % n:
        raise ShapeError(f"dimension {dim} of {shape} is not divisible by the group's {n} ranks")
    return [*shape[:dim], shape[dim] // n, *shape[dim + 1:]]


def _attention(q, k, v, kv_groups: int) -> None:
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ShapeError(f"q {list(q.shape)}, k {list(k.shape)} and v {list(v.shape)} are not [batch, heads, "
                         "seq, head_dim] with k and v alike")
    if q.shape[1] != k.shape[1] * kv_groups:
        raise ShapeError(f"q has {q.shape[1]} heads, k and v {k.shape[1]} x kv_groups {kv_groups}")
    if not q.dtype == k.dtype == v.dtype or not q.is_floating_point():
        raise ShapeError(f"q, k and v are {q.dtype}, {k.dtype} and {v.dtype}, one floating-point dtype is needed")


def _documents(q, rest: list) -> None:
    """The optional document positions: [batch, seq] int64 of q's rows."""
    if not rest:
        return
    d, = _tensors(rest, ("doc_pos",), 2)
    if list(d.shape) != [q.shape[0], q.shape[2]] or d.dtype != torch.int64:
        raise ShapeError(f"doc_pos is {list(d.shape)} {d.dtype}, q {list(q.shape)} needs [{q.shape[0]}, "
                         f"{q.shape[2]}] torch.int64")


def sp(op: str, attrs: dict, xs: list, mesh: Mesh) -> list[Spec]:
    """The results of an sp op for operands xs, or ShapeError naming what does not fit."""
    if op == "prim.unpack":
        if not isinstance(xs[0], (list, tuple)):
            raise ShapeError(f"operand is {type(xs[0]).__name__}, not a list")
        return [(list(t.shape), t.dtype) if isinstance(t, torch.Tensor) else None for t in xs[0]]
    if op in ("sp.attention", "sp.ring_attention"):
        q, k, v = _tensors(xs, ("q", "k", "v"), 4)[:3]
        _attention(q, k, v, attrs["kv_groups"])
        _documents(q, xs[3:])
        # ring attention merges the blocks' statistics itself: exact, fp32
        lse = BACKEND if op == "sp.attention" else (list(q.shape[:3]), torch.float32)
        return [([*q.shape[:3], v.shape[3]], q.dtype), lse]
    if op in ("sp.attention_grad", "sp.ring_attention_grad"):
        dout, q, k, v, out, lse = _tensors(xs, ("dout", "q", "k", "v", "out", "state"))[:6]
        _tensors(xs[:5], ("dout", "q", "k", "v", "out"), 4)
        _attention(q, k, v, attrs["kv_groups"])
        _documents(q, xs[6:])
        want = [*q.shape[:3], v.shape[3]]
        for name, t in (("dout", dout), ("out", out)):
            if list(t.shape) != want or t.dtype != q.dtype:
                raise ShapeError(f"{name} is {list(t.shape)} {t.dtype}, the attention of q {list(q.shape)} and "
                                 f"v {list(v.shape)} gives {want} {q.dtype}")
        if lse.dim() != 3 or list(lse.shape[:2]) != list(q.shape[:2]) or lse.shape[2] < q.shape[2]:
            raise ShapeError(f"state is {list(lse.shape)}, the softmax statistics of q {list(q.shape)} are "
                             f"[{q.shape[0]}, {q.shape[1]}, >= {q.shape[2]}]")
        return [(list(q.shape), q.dtype), (list(k.shape), k.dtype), (list(v.shape), v.dtype)]
    x, = _tensors(xs, ("x",))
    shape, n = list(x.shape), mesh.size(attrs["group"])
    if op == "sp.all_reduce":
        return [(shape, x.dtype)]
    if op == "sp.all_to_all":
        s, g = _dim(x, attrs["scatter_dim"], "scatter_dim"), _dim(x, attrs["gather_dim"], "gather_dim")
        shape = _divide(shape, s, n)
        shape[g] *= n
        return [(shape, x.dtype)]
    d = _dim(x, attrs["dim"])
    if op == "sp.all_gather":
        shape[d] *= n
        return [(shape, x.dtype)]
    if op in ("sp.reduce_scatter", "sp.shard_slice"):
        return [(_divide(shape, d, n), x.dtype)]
    if op == "sp.halo":
        if attrs["width"] > shape[d]:
            raise ShapeError(f"width {attrs['width']} is more than dimension {d} of {shape}")
        return [(shape, x.dtype)]
    raise ShapeError(f"no shape rule for {op}")


def dropout(xs: list) -> list[Spec]:
    x, p, train = xs
    _tensors([x], ("x",))
    if type(p) not in (int, float) or not 0 <= p <= 1:
        raise ShapeError(f"p={p!r}, a probability in [0, 1] is needed")
    return [(list(x.shape), x.dtype), (list(x.shape), torch.bool)]
