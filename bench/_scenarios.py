"""The scenarios, written once against a driver (raw, proofs, pexpect, service or tool).

Each group runs in a fresh worker process, so one group's memory cannot colour
another's RSS figures. Every group closes what it opened, also on failure.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any, Protocol

from _env import Expect
from _stats import summarize

__all__ = ["FULL", "GROUPS", "QUICK", "Driver", "run_group", "seq_bytes"]

FULL: dict[str, int] = {
    "open_warmup": 3,
    "open_iters": 40,
    "echo_warmup": 30,
    "echo_iters": 400,
    "repl_warmup": 20,
    "repl_iters": 200,
    "tp_lines": 2_000_000,
    "tp_warmup_lines": 20_000,
    "tp_iters": 5,
    "conc_sessions": 256,
    "conc_sends": 100,
    "idle_sessions": 100,
    "scale_sessions": 1000,
}

QUICK: dict[str, int] = {
    "open_warmup": 1,
    "open_iters": 3,
    "echo_warmup": 2,
    "echo_iters": 10,
    "repl_warmup": 1,
    "repl_iters": 5,
    "tp_lines": 20_000,
    "tp_warmup_lines": 1_000,
    "tp_iters": 1,
    "conc_sessions": 4,
    "conc_sends": 5,
    "idle_sessions": 5,
    "scale_sessions": 8,
}


class Driver(Protocol):
    name: str
    concurrent: bool

    async def open(self) -> Any: ...

    async def send(self, session: Any, text: str, expect: Expect = "prompt") -> str | None: ...

    async def close(self, session: Any) -> None: ...

    async def aclose(self) -> None: ...


def seq_bytes(lines: int) -> int:
    """Bytes ``seq 1 lines`` puts through a PTY (the terminal turns each LF into CRLF)."""
    total = 0
    digits = 1
    low = 1
    while low <= lines:
        high = min(lines, low * 10 - 1)
        total += (high - low + 1) * (digits + 2)
        digits += 1
        low *= 10
    return total


def _reasons(reasons: Iterable[str | None]) -> dict[str, int]:
    return dict(Counter(r if r is not None else "prompt_matched" for r in reasons))


def _retried(driver: Driver, before: int | None) -> dict[str, int]:
    """Sends since ``before`` that needed more than one look (for drivers that count them)."""
    now = getattr(driver, "retried", None)
    return {} if now is None or before is None else {"retried_sends": now - before}


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} missing from /proc/self/status")


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux 4.0+); False if the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
    except OSError:
        return False
    return True


async def _timed_sends(
    driver: Driver, session: Any, text: str, warmup: int, iters: int, expect: Expect = "prompt"
) -> dict[str, Any]:
    for _ in range(warmup):
        await driver.send(session, text, expect)
    samples: list[float] = []
    reasons: list[str | None] = []
    retried = getattr(driver, "retried", None)
    cpu = time.process_time()
    for _ in range(iters):
        start = time.perf_counter()
        reason = await driver.send(session, text, expect)
        samples.append(time.perf_counter() - start)
        reasons.append(reason)
    cpu = time.process_time() - cpu
    return {
        **summarize(samples),
        "cpu_ms_per_send": cpu * 1000 / iters,
        "wait_reasons": _reasons(reasons),
        **_retried(driver, retried),
    }


async def latency(driver: Driver, sizes: dict[str, int]) -> dict[str, Any]:
    """open, close (of an idle session), echo, pwd and the Python REPL ``1+1``."""
    opens: list[float] = []
    closes: list[float] = []
    for i in range(sizes["open_warmup"] + sizes["open_iters"]):
        start = time.perf_counter()
        session = await driver.open()
        opened = time.perf_counter()
        await driver.close(session)
        closed = time.perf_counter()
        if i >= sizes["open_warmup"]:
            opens.append(opened - start)
            closes.append(closed - opened)
    out: dict[str, Any] = {"open": summarize(opens), "close": summarize(closes)}
    session = await driver.open()
    try:
        out["echo"] = await _timed_sends(
            driver, session, "echo hi", sizes["echo_warmup"], sizes["echo_iters"]
        )
        out["pwd"] = await _timed_sends(
            driver, session, "pwd", sizes["echo_warmup"], sizes["echo_iters"]
        )
        startup = await driver.send(session, f"{sys.executable} -q -i", "repl")
        out["repl"] = await _timed_sends(
            driver, session, "1+1", sizes["repl_warmup"], sizes["repl_iters"], "repl"
        )
        out["repl"]["repl_startup_wait_reason"] = startup
    finally:
        await driver.close(session)
    return out


async def throughput(driver: Driver, sizes: dict[str, int]) -> dict[str, Any]:
    """``seq 1 N`` through one send; rate and peak RSS growth of this process."""
    lines = sizes["tp_lines"]
    nbytes = seq_bytes(lines)
    session = await driver.open()
    try:
        await driver.send(session, f"seq 1 {sizes['tp_warmup_lines']}")
        gc.collect()
        baseline = _status_kib("VmRSS")
        peak_reset = _reset_peak_rss()
        peak_before = _status_kib("VmHWM")
        samples: list[float] = []
        reasons: list[str | None] = []
        cpu = time.process_time()
        for _ in range(sizes["tp_iters"]):
            start = time.perf_counter()
            reasons.append(await driver.send(session, f"seq 1 {lines}"))
            samples.append(time.perf_counter() - start)
        cpu = time.process_time() - cpu
        peak = _status_kib("VmHWM")
        rates = sorted(nbytes / s / 1e6 for s in samples)
        out: dict[str, Any] = {
            **summarize(samples),
            "pty_bytes": nbytes,
            "mb_per_s_p50": rates[len(rates) // 2],
            "mb_per_s_min": rates[0],
            "mb_per_s_max": rates[-1],
            "rss_baseline_mib": baseline / 1024,
            "peak_rss_delta_mib": (peak - (peak_before if peak_reset else baseline)) / 1024,
            "peak_rss_reset": peak_reset,
            "cpu_ms_per_mb": cpu * 1000 / (nbytes * len(samples) / 1e6),
            "wait_reasons": _reasons(reasons),
        }
        backend = getattr(driver, "session_object", None)
        if backend is not None:
            scrollback = backend(session).scrollback
            out["scrollback_retained_bytes"] = scrollback.retained_bytes
            out["scrollback_retained_lines"] = scrollback.retained_lines
    finally:
        await driver.close(session)
    return out


async def concurrent(driver: Driver, sizes: dict[str, int]) -> dict[str, Any]:
    """N sessions each doing M sequential ``echo hi`` sends, all at once."""
    count = sizes["conc_sessions"]
    sessions: list[Any] = []
    try:
        for _ in range(count):
            sessions.append(await driver.open())
        await asyncio.gather(*(driver.send(s, "echo warm") for s in sessions))
        samples: list[float] = []
        reasons: list[str | None] = []

        async def worker(session: Any) -> None:
            for _ in range(sizes["conc_sends"]):
                start = time.perf_counter()
                reason = await driver.send(session, "echo hi")
                samples.append(time.perf_counter() - start)
                reasons.append(reason)

        retried = getattr(driver, "retried", None)
        wall = time.perf_counter()
        cpu = time.process_time()
        await asyncio.gather(*(worker(s) for s in sessions))
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
    finally:
        for session in sessions:
            await driver.close(session)
    return {
        **summarize(samples),
        "sessions": count,
        "sends_per_session": sizes["conc_sends"],
        "wall_s": wall,
        "sends_per_s": len(samples) / wall,
        "cpu_ms_per_send": cpu * 1000 / len(samples),
        "wait_reasons": _reasons(reasons),
        **_retried(driver, retried),
    }


async def idle_memory(driver: Driver, sizes: dict[str, int]) -> dict[str, Any]:
    """RSS of this process before and after opening N idle sessions."""
    count = sizes["idle_sessions"]
    await driver.close(await driver.open())  # first-use imports and caches
    gc.collect()
    before = _status_kib("VmRSS")
    sessions: list[Any] = []
    try:
        for _ in range(count):
            sessions.append(await driver.open())
        await asyncio.sleep(0.2)
        gc.collect()
        after = _status_kib("VmRSS")
    finally:
        for session in sessions:
            await driver.close(session)
    return {
        "sessions": count,
        "rss_before_mib": before / 1024,
        "rss_after_mib": after / 1024,
        "per_session_kib": (after - before) / count,
    }


GROUPS = {
    "latency": latency,
    "throughput": throughput,
    "concurrent": concurrent,
    "idle_memory": idle_memory,
}


async def run_group(group: str, driver: Driver, sizes: dict[str, int]) -> dict[str, Any]:
    """Run ``group`` with ``driver``; always close every session the driver opened."""
    try:
        return await GROUPS[group](driver, sizes)
    finally:
        await driver.aclose()
