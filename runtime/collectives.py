"""The sp / dp / world groups of a world = sp x dp mesh, and the collectives of the sp dialect,
through torch.distributed (gloo on CPU, NCCL/RCCL when the tensors are on a GPU).

Ranks are laid out sp-major inside a dp replica: rank = dp_index * sp + sp_index.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from .artifact import ArtifactError


class Mesh:
    def __init__(self, sp: int, dp: int):
        self.sp, self.dp = sp, dp
        if not dist.is_available() or not dist.is_initialized():
            if sp * dp != 1:
                raise ArtifactError(f"the artifact was compiled for sp={sp} x dp={dp} = {sp * dp} ranks; "
                                    "initialize a process group first (torchrun, or autospc train)")
            self.rank, self.groups = 0, {}
            return
        world = dist.get_world_size()
        if world != sp * dp:
            raise ArtifactError(f"the artifact was compiled for sp={sp} x dp={dp} = {sp * dp} ranks, but the "
                                f"process group has {world}")
        self.rank = dist.get_rank()
        self.groups = {"world": dist.group.WORLD}
        # every rank creates every group, in the same order, as torch.distributed requires
        for d in range(dp):
            g = dist.new_group(list(range(d * sp, (d + 1) * sp)))
            if self.rank // sp == d:
                self.groups["sp"] = g
        for s in range(sp):
            g = dist.new_group(list(range(s, sp * dp, sp)))
            if self.rank % sp == s:
                self.groups["dp"] = g

    def size(self, group: str) -> int:
        return {"sp": self.sp, "dp": self.dp, "world": self.sp * self.dp}[group]

    def index(self, group: str) -> int:
        return {"sp": self.rank % self.sp, "dp": self.rank // self.sp, "world": self.rank}[group]

    # ------------------------------------------------------------------ sp ops
    def all_reduce(self, x: torch.Tensor, op: str, group: str) -> torch.Tensor:
        if self.size(group) == 1:
            return x
        out = x.clone()
        dist.all_reduce(out, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                                 "avg": dist.ReduceOp.SUM}[op], group=self.groups[group])
        return out / self.size(group) if op == "avg" else out

    def all_to_all(self, x: torch.Tensor, scatter_dim: int, gather_dim: int, group: str) -> torch.Tensor:
        n = self.size(group)
        if n == 1:
            return x
        send = [c.contiguous() for c in x.chunk(n, scatter_dim)]
        recv = [torch.empty_like(send[0]) for _ in range(n)]
        dist.all_to_all(recv, send, group=self.groups[group])
        return torch.cat(recv, gather_dim)

    def all_gather(self, x: torch.Tensor, dim: int, group: str) -> torch.Tensor:
        n = self.size(group)
        if n == 1:
            return x
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(n)]
        dist.all_gather(parts, x, group=self.groups[group])
        return torch.cat(parts, dim)

    def reduce_scatter(self, x: torch.Tensor, dim: int, group: str) -> torch.Tensor:
        n = self.size(group)
        if n == 1:
            return x
        parts = [c.contiguous() for c in x.chunk(n, dim)]
        out = torch.empty_like(parts[0])
        dist.reduce_scatter(out, parts, group=self.groups[group])
        return out

    def shard_slice(self, x: torch.Tensor, dim: int, group: str) -> torch.Tensor:
        n = self.size(group)
        if n == 1:
            return x
        block = x.shape[dim] // n
        return x.narrow(dim, self.index(group) * block, block).contiguous()

    def halo(self, x: torch.Tensor, dim: int, width: int, fill: float, group: str) -> torch.Tensor:
        """out = x shifted left by `width` along dim across the group's shards; the end is `fill`."""
        n = self.size(group)
        head = x.narrow(dim, 0, width)
        if n == 1:
            nxt = torch.full_like(head, fill)
        else:
            heads = [torch.empty_like(head.contiguous()) for _ in range(n)]
            dist.all_gather(heads, head.contiguous(), group=self.groups[group])
            i = self.index(group)
            nxt = heads[i + 1] if i + 1 < n else torch.full_like(head, fill)
        return torch.cat([x.narrow(dim, width, x.shape[dim] - width), nxt], dim)
