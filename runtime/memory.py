"""What the runtime measures of its own memory: live bytes of the tensors it holds, by storage
(views share one), on top of the resident parameters; torch.cuda.max_memory_allocated on a GPU."""
from __future__ import annotations

from typing import Iterable

import torch


def _key(t: torch.Tensor) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.nbytes()


class LiveBytes:
    """Reference-counted storages of the tensors a program run holds; `peak` is the high-water mark
    of their bytes plus `base` (bytes resident outside the run)."""

    def __init__(self, base: int = 0, exclude: Iterable[torch.Tensor] = ()):
        self.exclude = {_key(t) for t in exclude}
        self.count: dict[tuple[int, int], int] = {}
        self.base = base
        self.live = 0
        self.peak = base

    def add(self, x) -> None:
        for t in (x if isinstance(x, (list, tuple)) else (x,)):
            if isinstance(t, torch.Tensor):
                k = _key(t)
                if k in self.exclude:
                    continue
                n = self.count.get(k, 0)
                self.count[k] = n + 1
                if n == 0:
                    self.live += k[1]
                    self.peak = max(self.peak, self.base + self.live)

    def adopt(self, x) -> None:
        """Count the tensors of `x` not counted yet: a program's arguments, of which the forward's
        saved values were counted when the forward made them (adding them again would keep them
        live past the backward's free)."""
        for t in (x if isinstance(x, (list, tuple)) else (x,)):
            if isinstance(t, torch.Tensor) and _key(t) not in self.count:
                self.add(t)

    def remove(self, x) -> None:
        for t in (x if isinstance(x, (list, tuple)) else (x,)):
            if isinstance(t, torch.Tensor):
                k = _key(t)
                if k not in self.count:
                    continue
                self.count[k] -= 1
                if self.count[k] == 0:
                    del self.count[k]
                    self.live -= k[1]


def resident_bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(k[1] for k in {_key(t) for t in tensors})
