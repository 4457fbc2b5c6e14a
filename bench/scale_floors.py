#!/usr/bin/env python3
"""The floors at a thousand terminals: the raw and proofs contenders driven as ``scale.py``.

    python3 bench/scale_floors.py                  # 1,000 sessions: raw, proofs, the tools
    python3 bench/scale_floors.py --sessions 200   # a smaller run

``bench/scale.py``'s send phase, run by the contenders of ``bench/run.py`` that have no
framework: ``raw`` (the marker protocol alone) and ``proofs`` (``raw`` plus the system
calls the prompt tier's proofs make). Each opens N shells, 64 at a time, sends one
warm-up ``echo`` to each, then 20 ``echo <token>`` per session with every session
sending at once and each session's sends following one another, and closes them. The
tools then run ``scale.py``'s scenario on the same shells: unconfined, because the
floors spawn bash with ptyprocess, outside any sandbox.

Each row carries the send phase's accounting from ``scale.py``: the loop's thread on a
CPU and runnable-waiting, the shells' processes on a CPU, the CPUs idle. A p99 a floor
does not meet on this host, no implementation of the same protocol (raw) or the same
proofs (proofs) meets with one event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import scale  # noqa: E402
from _proofs import ProofsDriver  # noqa: E402
from _raw import RawDriver, RawSession  # noqa: E402
from _stats import load_average, summarize  # noqa: E402

__all__ = ["floor", "main"]


async def floor(driver: RawDriver, sessions: int, sends: int, concurrency: int) -> dict[str, Any]:
    """Open ``sessions`` shells with ``driver``, run the send phase, close them."""
    limit = asyncio.Semaphore(concurrency)
    live: list[RawSession] = []

    async def open_one() -> None:
        async with limit:
            live.append(await driver.open())

    try:
        began = time.perf_counter()
        await asyncio.gather(*(open_one() for _ in range(sessions)))
        open_wall = time.perf_counter() - began
        await asyncio.gather(*(driver.send(session, "echo warm") for session in live))
        rounds: list[list[float]] = [[] for _ in range(sends)]

        async def drive(index: int, session: RawSession) -> None:
            for i in range(sends):
                began = time.perf_counter()
                await driver.send(session, f"echo t-{index}-{i}")
                rounds[i].append(time.perf_counter() - began)

        gc.collect()
        with scale._SendPhase([session.pid for session in live]) as phase:
            cpu = time.process_time()
            wall = time.perf_counter()
            await asyncio.gather(*(drive(index, session) for index, session in enumerate(live)))
            send_wall = time.perf_counter() - wall
            send_cpu = time.process_time() - cpu
    finally:
        await driver.aclose()
    samples = [latency for latencies in rounds for latency in latencies]
    return {
        "contender": driver.name,
        "sessions": sessions,
        "opened": len(live),
        "open_wall_s": open_wall,
        "send": summarize(samples),
        "send_rounds": [summarize(latencies) for latencies in rounds],
        "send_wall_s": send_wall,
        "send_cpu_ms_per_send": send_cpu * 1000 / max(1, len(samples)),
        "send_phase": phase.summary(send_wall),
    }


def _row(result: dict[str, Any]) -> str:
    send, phase = result["send"], result["send_phase"]
    return (
        f"| {result['contender']} | {result['opened']} | {send['p50_ms']:.0f} | "
        f"{send['p99_ms']:.0f} | {result['send_cpu_ms_per_send'] * 1000:.0f} | "
        f"{phase['loop_on_cpu_s']:.2f} | {phase['loop_runnable_waiting_s']:.2f} | "
        f"{phase.get('shells_on_cpu_s', 0.0):.2f} | {phase.get('cpus_idle_s', 0.0):.2f} |"
    )


def markdown(results: list[dict[str, Any]]) -> str:
    lines = [
        "| contender | sessions | send p50 ms | send p99 ms | loop CPU µs/send | "
        "loop on a CPU s | loop waiting s | shells on a CPU s | CPUs idle s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_row(result) for result in results]
    return "\n".join(lines)


async def run(
    sessions: int, sends: int, concurrency: int, owner: str | None = None
) -> list[dict[str, Any]]:
    owner = owner or f"bench-floors-{os.getpid()}"
    # A master per shell: the soft limit up to the hard one, as the harness raises it.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    results = []
    for driver in (RawDriver(owner), ProofsDriver(owner)):
        print(f"{driver.name}: {sessions} sessions x {sends} sends ...", flush=True)
        results.append(await floor(driver, sessions, sends, concurrency))
        print("  " + _row(results[-1]), flush=True)
    print(f"tools (unconfined): {sessions} sessions x {sends} sends ...", flush=True)
    tools = await scale.run(sessions, owner=owner, unconfined=True, sends=sends)
    tools["contender"] = "tools"
    results.append(tools)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=scale.DEFAULT_SESSIONS)
    parser.add_argument("--sends", type=int, default=scale.SENDS, help="sends per session")
    parser.add_argument("--json", help="where to save (default bench/results/scale_floors.json)")
    parser.add_argument("--owner", help="the owner marker every shell carries (for leak checks)")
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    load = list(load_average())
    results = asyncio.run(run(args.sessions, args.sends, scale.OPEN_CONCURRENCY, args.owner))
    path = Path(args.json) if args.json else BENCH / "results" / "scale_floors.json"
    scale.save_report(path, started, load, "floors", results)
    print()
    print(markdown(results))
    print(f"\nresults: {path}")
    return 0 if results[-1]["clean"] else 1


if __name__ == "__main__":
    sys.exit(main())
