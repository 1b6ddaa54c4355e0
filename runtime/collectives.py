"""The sp / dp / world groups of a world = sp x dp mesh, and the collectives of the sp dialect,
through torch.distributed (gloo on CPU, NCCL/RCCL when the tensors are on a GPU).

Ranks are laid out sp-major inside a dp replica: rank = dp_index * sp + sp_index.

The sequence order (program["mesh"]["order"]): "contiguous", rank i of the sp group holds block i of
sp equal blocks; or "zigzag" (causal ring attention), the sequence is cut into 2 x sp chunks and rank
i holds chunks i and 2 x sp - 1 - i, one early and one late, so that every rank does the same share
of causal attention. shard_slice and halo follow the order; the all-to-alls and all-gathers of
Ulysses attention assume contiguous blocks and refuse zigzag.

Trust: the mesh's groups carry a timeout (DEFAULT_TIMEOUT_S unless the caller asks), so a stalled or
dead peer turns into a CollectiveError naming this rank, the collective, the group and the peers it
waited for. At the end of every program run the ranks exchange one flag each over the world group
(`agree`). A rank whose run failed (`fail_run`) first joins the run's remaining collectives with
zeros of their declared shapes, so its peers are never left waiting inside the program, then raises
its flag: every rank fails the same run at the same point and the next step starts in lockstep (a
notebook that catches the error can simply run the step again). One flag per run, not one per
collective: each blocking exchange costs a rendezvous of every rank.
"""
from __future__ import annotations

import datetime
import functools
from typing import Callable

import torch
import torch.distributed as dist

from . import ring_attention
from .artifact import DTYPES, ArtifactError

DEFAULT_TIMEOUT_S = 300.0   # minutes, not gloo's 30: a stalled peer is an error, not a silent hang


class CollectiveError(RuntimeError):
    """A collective did not complete: a peer stalled, died, or failed this step."""


class PeerFailedError(CollectiveError):
    """Another rank failed this step; this rank stops at the same point."""


def _identity_over_one_rank(method: Callable) -> Callable:
    """A collective (or shard) over a group of one rank is its input; the group is the last argument."""
    @functools.wraps(method)
    def run(self, x: torch.Tensor, *args) -> torch.Tensor:
        return x if self.size(args[-1]) == 1 else method(self, x, *args)
    return run


class Mesh:
    def __init__(self, sp: int, dp: int, timeout_s: float = DEFAULT_TIMEOUT_S, order: str = "contiguous"):
        self.sp, self.dp, self.order = sp, dp, order
        self.timeout_s = timeout_s
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
        timeout = datetime.timedelta(seconds=timeout_s)
        # every rank creates every group, in the same order, as torch.distributed requires; the world
        # group too, for its timeout (the default group's is whatever the caller initialized)
        self.groups = {"world": dist.new_group(list(range(world)), timeout=timeout)}
        self.members = {"world": list(range(world))}
        for d in range(dp):
            ranks = list(range(d * sp, (d + 1) * sp))
            g = dist.new_group(ranks, timeout=timeout)
            if self.rank // sp == d:
                self.groups["sp"], self.members["sp"] = g, ranks
        for s in range(sp):
            ranks = list(range(s, sp * dp, sp))
            g = dist.new_group(ranks, timeout=timeout)
            if self.rank % sp == s:
                self.groups["dp"], self.members["dp"] = g, ranks

    def size(self, group: str) -> int:
        return {"sp": self.sp, "dp": self.dp, "world": self.sp * self.dp}[group]

    def index(self, group: str) -> int:
        return {"sp": self.rank % self.sp, "dp": self.rank // self.sp, "world": self.rank}[group]

    # ------------------------------------------------------------------ failing together
    def _call(self, what: str, group: str, fn, *args, **kwargs):
        """One torch.distributed call; a timeout or a lost peer becomes a one-line CollectiveError."""
        try:
            return fn(*args, group=self.groups[group], **kwargs)
        except RuntimeError as e:
            peers = [r for r in self.members[group] if r != self.rank]
            cause = str(e).strip().split("\n")[0].rpartition("] ")[2]
            verb = "got no answer from" if "Timed out" in cause or "timed out" in cause else "lost"
            raise CollectiveError(f"rank {self.rank}: {what} over the {group} group {self.members[group]} {verb} "
                                  f"rank{'s' if len(peers) > 1 else ''} {', '.join(map(str, peers))} (timeout "
                                  f"{self.timeout_s:g} s): {cause}") from None

    def agree(self, where: str, device: torch.device, failed: bool = False) -> None:
        """Exchange every rank's failure flag over the world group (on the run device, as NCCL
        needs); raise if another rank failed."""
        if self.sp * self.dp == 1:
            return
        flags = torch.zeros(self.sp * self.dp, dtype=torch.int32, device=device)
        flags[self.rank] = int(failed)
        self._call(f"the failure check before {where}", "world", dist.all_reduce, flags)
        bad = flags.nonzero().flatten().tolist()
        if bad and not failed:
            raise PeerFailedError(f"rank {self.rank}: stopped before {where}: rank{'s' if len(bad) > 1 else ''} "
                                  f"{', '.join(map(str, bad))} failed this step")

    def fail_run(self, program: dict, failed_at: int, where: str, device: torch.device) -> None:
        """This rank's run of `program` failed at instruction failed_at (not in a collective): join
        the remaining collectives with zeros of their declared input shapes, then raise the flag at
        the run's end, where the other ranks' agree() fails them too."""
        if self.sp * self.dp == 1:
            return
        declared = {i: (a["shape"], a["dtype"]) for i, a in enumerate(program["args"])}
        for inst in program["instructions"]:
            for out, shape, dtype in zip(inst["out"], inst.get("shapes", []), inst.get("dtypes", [])):
                declared[out] = (shape, dtype)
        for inst in program["instructions"][failed_at + 1:]:
            if inst["op"] in COLLECTIVES:
                zeros = [torch.zeros(declared[a["r"]][0], dtype=DTYPES[declared[a["r"]][1]], device=device)
                         for a in inst["args"]]
                COLLECTIVES[inst["op"]](self, inst["attrs"], *zeros)
        self.agree(where, device, failed=True)

    # ------------------------------------------------------------------ sp ops
    @_identity_over_one_rank
    def all_reduce(self, x: torch.Tensor, op: str, group: str) -> torch.Tensor:
        out = x.clone()
        self._call("sp.all_reduce", group, dist.all_reduce, out,
                   op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.SUM}[op])
        return out / self.size(group) if op == "avg" else out

    def _contiguous(self, op: str, group: str) -> None:
        if self.order == "zigzag" and group == "sp":
            raise ArtifactError(f"{op} over the sp group needs contiguous sequence blocks, the program's sequence "
                                "order is zigzag")

    def zigzag(self, group: str) -> bool:
        return self.order == "zigzag" and group == "sp"

    @_identity_over_one_rank
    def all_to_all(self, x: torch.Tensor, scatter_dim: int, gather_dim: int, group: str) -> torch.Tensor:
        self._contiguous("sp.all_to_all", group)
        n = self.size(group)
        send = [c.contiguous() for c in x.chunk(n, scatter_dim)]
        recv = [torch.empty_like(send[0]) for _ in range(n)]
        self._call("sp.all_to_all", group, dist.all_to_all, recv, send)
        return torch.cat(recv, gather_dim)

    @_identity_over_one_rank
    def all_gather(self, x: torch.Tensor, dim: int, group: str) -> torch.Tensor:
        self._contiguous("sp.all_gather", group)
        x = x.contiguous()
        parts = [torch.empty_like(x) for _ in range(self.size(group))]
        self._call("sp.all_gather", group, dist.all_gather, parts, x)
        return torch.cat(parts, dim)

    @_identity_over_one_rank
    def reduce_scatter(self, x: torch.Tensor, dim: int, group: str) -> torch.Tensor:
        parts = [c.contiguous() for c in x.chunk(self.size(group), dim)]
        out = torch.empty_like(parts[0])
        self._call("sp.reduce_scatter", group, dist.reduce_scatter, out, parts)
        return out

    @_identity_over_one_rank
    def shard_slice(self, x: torch.Tensor, dim: int, group: str) -> torch.Tensor:
        n, i = self.size(group), self.index(group)
        if self.zigzag(group):
            chunks = x.chunk(2 * n, dim)
            return torch.cat([chunks[i], chunks[2 * n - 1 - i]], dim)
        block = x.shape[dim] // n
        return x.narrow(dim, i * block, block).contiguous()

    def ring_pass(self, xs: list[torch.Tensor], what: str, group: str) -> Callable[[], list[torch.Tensor]]:
        """Start sending xs to the next rank of the group (in index order, wrapping) and receiving the
        previous rank's tensors of the same shapes; the returned wait() gives the received ones."""
        members, i = self.members[group], self.index(group)
        nxt, prev = members[(i + 1) % len(members)], members[(i - 1) % len(members)]
        sends = [x.contiguous() for x in xs]
        recvs = [torch.empty_like(x) for x in sends]

        def start(group):
            return dist.batch_isend_irecv([*(dist.P2POp(dist.isend, x, nxt, group) for x in sends),
                                           *(dist.P2POp(dist.irecv, x, prev, group) for x in recvs)])
        requests = self._call(what, group, start)

        def wait() -> list[torch.Tensor]:
            self._call(what, group, lambda group: [r.wait() for r in requests])
            return recvs
        return wait

    def halo(self, x: torch.Tensor, dim: int, width: int, fill: float, group: str) -> torch.Tensor:
        """out = x shifted left by `width` along dim across the group's shards; the end is `fill`."""
        n = self.size(group)
        if n > 1 and self.zigzag(group):
            return self._zigzag_halo(x, dim, width, fill, group)
        head = x.narrow(dim, 0, width)
        if n == 1:
            nxt = torch.full_like(head, fill)
        else:
            heads = [torch.empty_like(head.contiguous()) for _ in range(n)]
            self._call("sp.halo", group, dist.all_gather, heads, head.contiguous())
            i = self.index(group)
            nxt = heads[i + 1] if i + 1 < n else torch.full_like(head, fill)
        return torch.cat([x.narrow(dim, width, x.shape[dim] - width), nxt], dim)


    def _zigzag_halo(self, x: torch.Tensor, dim: int, width: int, fill: float, group: str) -> torch.Tensor:
        """halo over zigzag chunks: this rank's early chunk i is followed by chunk i + 1 (the next rank's
        early chunk, or this rank's own late chunk after the last rank), its late chunk 2n - 1 - i by
        chunk 2n - i (the previous rank's late chunk; rank 0's is the end of the sequence)."""
        n, i = self.size(group), self.index(group)
        early, late = x.chunk(2, dim)
        heads = torch.cat([early.narrow(dim, 0, width), late.narrow(dim, 0, width)], dim).contiguous()
        parts = [torch.empty_like(heads) for _ in range(n)]
        self._call("sp.halo", group, dist.all_gather, parts, heads)
        after_early = parts[i + 1].narrow(dim, 0, width) if i + 1 < n else late.narrow(dim, 0, width)
        after_late = parts[i - 1].narrow(dim, width, width) if i > 0 else torch.full_like(after_early, fill)
        rest = early.shape[dim] - width
        return torch.cat([early.narrow(dim, width, rest), after_early, late.narrow(dim, width, rest), after_late], dim)

# the sp collectives by op name, as the executor calls them: (mesh, attrs, *inputs) -> output(s)
COLLECTIVES = {
    "sp.all_to_all": lambda m, a, x: m.all_to_all(x, a["scatter_dim"], a["gather_dim"], a["group"]),
    "sp.all_reduce": lambda m, a, x: m.all_reduce(x, a["op"], a["group"]),
    "sp.all_gather": lambda m, a, x: m.all_gather(x, a["dim"], a["group"]),
    "sp.reduce_scatter": lambda m, a, x: m.reduce_scatter(x, a["dim"], a["group"]),
    "sp.halo": lambda m, a, x: m.halo(x, a["dim"], a["width"], a["fill"], a["group"]),
    "sp.ring_attention": lambda m, a, *x: ring_attention.forward(m, *x, **a),
    "sp.ring_attention_grad": lambda m, a, *x: ring_attention.backward(m, *x, **a),
}
