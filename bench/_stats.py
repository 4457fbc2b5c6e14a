"""Summary statistics and machine facts for benchmark results."""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["load_average", "machine", "percentile", "summarize"]


def percentile(values: Sequence[float], q: float) -> float:
    """Return the ``q``-th percentile (0..100) with linear interpolation between ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """Median, p95, p99, min and max of ``values`` (seconds in, milliseconds out)."""
    ms = [v * 1000 for v in values]
    return {
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "min_ms": min(ms) if ms else math.nan,
        "max_ms": max(ms) if ms else math.nan,
    }


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages."""
    return os.getloadavg()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Hardware", "Processor"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    uname = platform.uname()
    return {
        "nproc": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "kernel": f"{uname.system} {uname.release}",
        "arch": uname.machine,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
    }
