"""Byte counts as people write and read them: a leaf module (it imports nothing of autosp), shared by
the passes, the CLI, the reports and the benchmarks."""
from __future__ import annotations

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str | int) -> int:
    """'12GiB', '500MB', '1e9' (or an int) -> bytes."""
    if isinstance(text, int):
        return text
    t = text.strip().lower().replace(" ", "")
    num = t.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = t[len(num):]
    if unit not in _UNITS or not num:
        raise ValueError(f"cannot read {text!r} as a size (e.g. 12GiB, 500MB, 1e9)")
    try:
        return int(float(num) * _UNITS[unit])
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a size (e.g. 12GiB, 500MB, 1e9)") from None


def human(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return str(n)


def less_reserve(total: int, reserve: int, names: tuple[str, str] = ("memory_budget", "reserve")) -> int:
    """The bytes of `total` left to the step beside `reserve` (what the device holds that the prediction
    does not count); ValueError, naming both as `names`, where nothing is left."""
    if reserve >= total:
        raise ValueError(f"{names[0]} {human(total)} leaves nothing for the step beside {names[1]} {human(reserve)}")
    return total - reserve
