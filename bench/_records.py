"""What records cost (SPEC §23): the same sends with recording off, on, and on with the audit log.

Three harnesses in one worker process — plain, with ``recording.dir``, and with
``recording.dir`` and ``audit.file`` — each with one session, driven through
``call_tool`` in rotating blocks, so all see the same machine at the same moments. CPU
is this process's (``time.process_time``: the event loop and any thread); the recorder
process's CPU (the JSON encoding and the writes, on another core) is reported beside it.
Targets: with recording on, echo p50 and CPU per MB of output within 10 % of off (the
CPU ratios are the medians of the per-round ratios).
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import psutil
from _scenarios import seq_bytes
from _stack import ToolDriver, stack_config
from _stats import summarize

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.records.link import FLUSH_INTERVAL_S

__all__ = ["RecordedToolDriver", "run_records"]

SCROLLBACK = {"scrollback_max_bytes": 4 * 1024 * 1024, "scrollback_lines": 1_000_000}
FULL = {
    "echo_warmup": 30,
    "echo_rounds": 12,
    "echo_block": 50,
    "tp_lines": 2_000_000,
    "tp_iters": 10,
}
QUICK = {"echo_warmup": 2, "echo_rounds": 2, "echo_block": 5, "tp_lines": 20_000, "tp_iters": 1}


class RecordedToolDriver(ToolDriver):
    """The tool driver on a harness that records every session (and audits every call)."""

    name = "tool+records"

    def __init__(self, owner_id: str, directory: str, *, audit: bool, **bash: Any) -> None:
        super().__init__(owner_id, **bash)
        self.directory = directory
        self.audit = audit

    async def start(self) -> None:
        config = stack_config(**self._bash)
        # Room for every byte the throughput sends produce: the cut at max_bytes would
        # make the later sends cheaper than a recorded send is.
        config["recording"] = {"dir": os.path.join(self.directory, "casts"), "max_bytes": 2**31}
        if self.audit:
            config["audit"] = {"file": os.path.join(self.directory, "audit.jsonl")}
        self.harness = Harness(config=config)
        await self.harness.start()
        self.agent = self.harness.create_agent(self._owner_id)

    def recorder_cpu_s(self) -> float:
        """CPU seconds the recorder process has used so far."""
        pid = self.h.ctx.recordings.recorder_pid
        times = psutil.Process(pid).cpu_times()
        return float(times.user + times.system)


MODES = ("off", "recording", "recording+audit")


async def _block(
    driver: ToolDriver, session: str, text: str, count: int
) -> tuple[list[float], float, float]:
    """``count`` sends: their wall times, this process's CPU and the recorder's CPU."""
    recorder = driver.recorder_cpu_s if isinstance(driver, RecordedToolDriver) else None
    samples: list[float] = []
    helper = recorder() if recorder is not None else 0.0
    cpu = time.process_time()
    for _ in range(count):
        start = time.perf_counter()
        await driver.send(session, text)
        samples.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu
    if recorder is not None:
        # the recorder writes what a block produced within a flush interval after it
        await asyncio.sleep(2 * FLUSH_INTERVAL_S)
        helper = recorder() - helper
    return samples, cpu, helper


def _order(round_: int) -> tuple[str, ...]:
    """Each mode goes first, second and third equally often."""
    shift = round_ % len(MODES)
    return MODES[shift:] + MODES[:shift]


async def run_records(owner: str, quick: bool) -> dict[str, Any]:
    sizes = QUICK if quick else FULL
    directory = tempfile.mkdtemp(prefix="dsh-bench-records-")
    drivers: dict[str, ToolDriver] = {
        "off": ToolDriver(owner, **SCROLLBACK),
        "recording": RecordedToolDriver(owner, directory + "/r", audit=False, **SCROLLBACK),
        "recording+audit": RecordedToolDriver(owner, directory + "/a", audit=True, **SCROLLBACK),
    }
    sessions: dict[str, str] = {}
    samples: dict[str, dict[str, list[float]]] = {m: {"echo": [], "tp": []} for m in MODES}
    cpu: dict[str, dict[str, float]] = {m: {"echo": 0.0, "tp": 0.0} for m in MODES}
    helper: dict[str, dict[str, float]] = {m: {"echo": 0.0, "tp": 0.0} for m in MODES}
    # Per round, each mode's CPU per send or per MB: the ratios are the medians of the
    # rounds' ratios, which the machine's other load moves far less than the totals.
    per_round: dict[str, dict[str, list[float]]] = {m: {"echo": [], "tp": []} for m in MODES}
    nbytes = seq_bytes(sizes["tp_lines"])
    try:
        for mode, driver in drivers.items():
            await driver.start()
            sessions[mode] = await driver.open()
            for _ in range(sizes["echo_warmup"]):
                await driver.send(sessions[mode], "echo hi")
        plan = [("echo", "echo hi", sizes["echo_block"], sizes["echo_rounds"])]
        plan += [("tp", f"seq 1 {sizes['tp_lines']}", 1, sizes["tp_iters"])]
        for scenario, text, count, rounds in plan:
            for round_ in range(rounds):
                for mode in _order(round_):
                    wall, used, recorder = await _block(drivers[mode], sessions[mode], text, count)
                    samples[mode][scenario] += wall
                    cpu[mode][scenario] += used
                    helper[mode][scenario] += recorder
                    per_round[mode][scenario].append(used / count)
    finally:
        for mode, driver in drivers.items():
            if mode in sessions:
                await driver.close(sessions[mode])
            await driver.aclose()
        recorded = sum(os.path.getsize(p) for p in glob.glob(f"{directory}/*/casts/*"))
        with open(f"{directory}/a/audit.jsonl", encoding="utf-8") as handle:
            audit_lines = sum(1 for _ in handle)
        shutil.rmtree(directory, ignore_errors=True)

    out: dict[str, Any] = {
        "recorded_bytes": recorded,
        "audit_lines": audit_lines,
        "pty_bytes": nbytes,
        "modes": list(MODES),
    }
    for mode in MODES:
        echo, tp = samples[mode]["echo"], samples[mode]["tp"]
        megabytes = nbytes * len(tp) / 1e6
        rates = sorted(nbytes / s / 1e6 for s in tp)
        out[mode] = {
            "echo": {
                **summarize(echo),
                "cpu_ms_per_send": cpu[mode]["echo"] * 1000 / len(echo),
                "recorder_cpu_ms_per_send": helper[mode]["echo"] * 1000 / len(echo),
            },
            "throughput": {
                **summarize(tp),
                "mb_per_s_p50": rates[len(rates) // 2],
                "cpu_ms_per_mb": cpu[mode]["tp"] * 1000 / megabytes,
                "recorder_cpu_ms_per_mb": helper[mode]["tp"] * 1000 / megabytes,
            },
        }
    off = out["off"]
    for mode in MODES[1:]:
        on = out[mode]
        out[f"{mode}_x"] = {
            "echo_p50": on["echo"]["p50_ms"] / off["echo"]["p50_ms"],
            "echo_cpu": _paired(per_round[mode]["echo"], per_round["off"]["echo"]),
            "cpu_per_mb": _paired(per_round[mode]["tp"], per_round["off"]["tp"]),
            "rate": on["throughput"]["mb_per_s_p50"] / off["throughput"]["mb_per_s_p50"],
        }
    return out


def _paired(on: list[float], off: list[float]) -> float:
    """The median of the per-round ratios ``on / off``."""
    return statistics.median(a / b for a, b in zip(on, off, strict=True) if b > 0)
