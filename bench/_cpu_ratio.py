"""Tool-level CPU per ``echo`` against the ``proofs`` contender's, in one process (SPEC §24).

The latency group measures each contender in a worker of its own, at another moment; on
a small shared machine the proofs figure alone moves by 2x between such processes, so
their ratio is mostly noise. Here one worker holds a :class:`ProofsDriver` session and a
:class:`ToolDriver` session (the full stack through ``call_tool``) open at once and
sends ``echo hi`` to them in interleaved blocks, the contender going first alternating
from block to block, after a warm-up of each. A block's CPU is this process's
(``time.process_time``: the event loop and any thread) over its sends; a noise spike
lands in both contenders' blocks of that moment alike.

The figure the target reads is the ratio of the two contenders' medians of per-block
CPU per send; the ratio of the totals and the median of the per-block ratios are
reported beside it, and the median of the per-block differences (what the stack adds,
in µs). ``idle_cpu_ms_per_s`` is the process's CPU while both sessions sit
idle: whatever the harness does in the background is charged to whichever block runs,
so it should be near zero.

Interleaving cancels a spike that lands on both contenders alike, not a state of the
machine that changes their costs by different amounts: on a 2-vCPU VM the ratio held
within 0.1 from run to run on a quiet machine, and moved between 1.8 and 3.3 while other
tests ran (the proofs figure fell and the tool's rose); use ``--max-load``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from typing import Any

from _proofs import ProofsDriver
from _stack import ToolDriver
from _stats import summarize

__all__ = ["CONTENDERS", "FULL", "QUICK", "run_cpu"]

FULL: dict[str, int] = {"warmup": 50, "blocks": 20, "block": 100, "idle_ms": 1000}
QUICK: dict[str, int] = {"warmup": 5, "blocks": 4, "block": 10, "idle_ms": 200}
CONTENDERS = ("proofs", "tool")
TEXT = "echo hi"


async def _block(
    driver: ProofsDriver | ToolDriver, session: Any, count: int
) -> tuple[list[float], float, list[str | None]]:
    """``count`` sends: their wall times, this process's CPU over them, their reasons."""
    samples: list[float] = []
    reasons: list[str | None] = []
    cpu = time.process_time()
    for _ in range(count):
        start = time.perf_counter()
        reasons.append(await driver.send(session, TEXT))
        samples.append(time.perf_counter() - start)
    return samples, time.process_time() - cpu, reasons


async def run_cpu(owner: str, quick: bool) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    proofs = ProofsDriver(owner)
    tool = ToolDriver(owner)
    drivers: dict[str, ProofsDriver | ToolDriver] = {"proofs": proofs, "tool": tool}
    sessions: dict[str, Any] = {}
    samples: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    cpu: dict[str, float] = {c: 0.0 for c in CONTENDERS}
    per_block: dict[str, list[float]] = {c: [] for c in CONTENDERS}
    reasons: dict[str, Counter[str]] = {c: Counter() for c in CONTENDERS}
    try:
        await tool.start()
        for name, driver in drivers.items():
            sessions[name] = await driver.open()
            for _ in range(sizes["warmup"]):
                await driver.send(sessions[name], TEXT)
        idle = time.process_time()
        await asyncio.sleep(sizes["idle_ms"] / 1000)
        idle_cpu = time.process_time() - idle
        retried = proofs.retried
        for block in range(sizes["blocks"]):
            order = CONTENDERS if block % 2 == 0 else CONTENDERS[::-1]
            for name in order:
                wall, used, why = await _block(drivers[name], sessions[name], sizes["block"])
                samples[name] += wall
                cpu[name] += used
                per_block[name].append(used / len(wall))
                reasons[name].update(r if r is not None else "prompt_matched" for r in why)
        retried = proofs.retried - retried
    finally:
        for name, driver in drivers.items():
            if name in sessions:
                await drivers[name].close(sessions[name])
            await driver.aclose()

    out: dict[str, Any] = {
        "blocks": sizes["blocks"],
        "block_sends": sizes["block"],
        "warmup_sends": sizes["warmup"],
        "idle_cpu_ms_per_s": idle_cpu * 1e6 / sizes["idle_ms"],
    }
    for name in CONTENDERS:
        counted = dict(reasons[name])
        out[name] = {
            **summarize(samples[name]),
            "cpu_ms_per_send": cpu[name] * 1000 / len(samples[name]),
            "block_median_cpu_ms_per_send": statistics.median(per_block[name]) * 1000,
            "block_cpu_ms_per_send": [v * 1000 for v in per_block[name]],
            "wait_reasons": counted,
            "wrong": sum(n for r, n in counted.items() if r != "stdin_read"),
        }
    out["proofs"]["retried_sends"] = retried
    block_x = [t / p for t, p in zip(per_block["tool"], per_block["proofs"], strict=True) if p > 0]
    out["tool_x_proofs"] = {
        "block_medians": out["tool"]["block_median_cpu_ms_per_send"]
        / out["proofs"]["block_median_cpu_ms_per_send"],
        "totals": out["tool"]["cpu_ms_per_send"] / out["proofs"]["cpu_ms_per_send"],
        "per_block_median": statistics.median(block_x) if block_x else float("nan"),
        "per_block_min": min(block_x, default=float("nan")),
        "per_block_max": max(block_x, default=float("nan")),
    }
    # What the stack adds to a proven send: a cost the machine's state adds to both
    # contenders alike cancels here, where it would pull the ratio towards 1.
    out["tool_minus_proofs_us"] = 1e6 * statistics.median(
        t - p for t, p in zip(per_block["tool"], per_block["proofs"], strict=True)
    )
    return out
