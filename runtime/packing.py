"""Parameters packed side by side: sp-merge-projections stacks the weights of projections of one
input (q / k / v, gate / up) with `cat(W_i, 0)`. The module keeps each such group in one storage, its
parameters views of it under their own names, so the cat is a view of them and costs nothing."""
from __future__ import annotations

import torch

CAT = "aten.cat.default"


def packs(program: dict) -> dict[int, list[str]]:
    """Instruction index -> the parameters it stacks, for each cat along dim 0 of parameters alone."""
    params = {i: a["name"] for i, a in enumerate(program.get("args", [])) if a.get("role") == "param"}
    out = {}
    for i, inst in enumerate(program["instructions"]):
        if inst["op"] != CAT or not inst["args"] or "l" not in inst["args"][0]:
            continue
        dim = inst["args"][1].get("c", 0) if len(inst["args"]) > 1 else 0
        regs = [e.get("r") for e in inst["args"][0]["l"]]
        if dim == 0 and len(regs) > 1 and all(r in params for r in regs):
            out[i] = [params[r] for r in regs]
    return out


def adjacent(tensors: list[torch.Tensor]) -> bool:
    """The tensors lie one after the other in one storage, contiguous (so their cat along dim 0 is a view)."""
    first = tensors[0]
    if first.device.type == "meta":
        return False
    ptr, offset = first.untyped_storage().data_ptr(), first.storage_offset()
    for t in tensors:
        if not t.is_contiguous() or t.dtype != first.dtype or t.device != first.device or \
                t.untyped_storage().data_ptr() != ptr or t.storage_offset() != offset:
            return False
        offset += t.numel()
    return True


def stacked(tensors: list[torch.Tensor]) -> torch.Tensor:
    """cat(tensors, 0): a view when they are adjacent, else a copy."""
    if adjacent(tensors):
        first = tensors[0]
        rows = sum(t.shape[0] for t in tensors)
        return first.as_strided((rows, *first.shape[1:]), first.stride(), first.storage_offset())
    return torch.cat(tensors, 0)


def pack(params: list[torch.nn.Parameter]) -> None:
    """Put the parameters side by side in one new storage (their values kept) unless they are."""
    if adjacent(params) or params[0].device.type == "meta":
        return
    with torch.no_grad():
        whole = torch.cat([p.detach() for p in params], 0)
        for p, piece in zip(params, whole.split([p.shape[0] for p in params], 0)):
            p.data = piece
