#!/usr/bin/env python3
"""How long opening terminals stalls the event loop: fork server vs in-process fork.

    python3 bench/loop_lag.py                 # 20 batches of 16 concurrent opens per row
    python3 bench/loop_lag.py --quick         # 3 batches (smoke)
    python3 bench/loop_lag.py --batches 40 --concurrency 16 --json /tmp/lag.json

Each row runs in a fresh worker process that imports the whole stack (so the process
that forks is as large as a real host's). A probe task spins on ``await
asyncio.sleep(0)`` and records every gap between two of its turns: a gap is time the
loop could not run anything else. Per open, the stall is the longest gap while that
open was in flight (start of the call to its return); the table shows that per-open
stall at p50/p99/max over all opens, next to the same probe with nothing opening
(``idle``, the machine's own scheduling noise over windows of the same length).

``caused`` attributes the loop's work to the open that did it: every callback runs in
the context of the task that scheduled it (a reader callback in that of the task that
added the reader), so a context variable set by each open tags its steps, its reader
callbacks and the tasks it starts. Per open, the caused stall is the largest CPU time
its own callbacks took in one loop iteration while it was in flight: how long this open
held the loop, where the shared columns charge every open in flight with the longest
gap any of them (or the collector, or another task) made.

``on-CPU`` is the loop thread's own CPU time inside the longest gap of each open: a
fork on the loop is CPU time of the loop thread, while being descheduled on a busy
machine is not, so this column separates our stalls from the machine's. A pass of
Python's cyclic garbage collector stalls any loop whenever allocation triggers it (a
full pass over a large host takes tens of milliseconds); the ``no-GC`` columns take
collection time out of each gap, and ``GC passes (max)`` counts them during the opens.

Rows: ``before`` — the in-process fork as it was, each open's loop work done as soon as
it is ready (16 opens started together fork in one loop iteration); ``in-process`` —
the in-process fork, opens taking turns (one step per loop iteration); ``fork-server``
— the default, no fork in this process.

Levels: ``provider`` — ``spawn_terminal`` of ``bash -i`` until it returns (the spawn
path alone); ``service`` — ``ctx.terminals.spawn`` of a ``shell`` session until its
first prompt (everything an open does). One open is made before measuring, so the fork
server's own start is not in the table (it happens on a thread, once per process);
``first open`` reports that one separately.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import asyncio.events
import contextlib
import contextvars
import gc
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _stats import load_average, machine, percentile  # noqa: E402

SPAWNERS = ("before", "in-process", "fork-server")
LEVELS = ("provider", "service")


_OPEN: contextvars.ContextVar[int | None] = contextvars.ContextVar("open", default=None)
_KEY_SPAN = 1 << 20  # more opens than any run makes


class Attribution:
    """Loop-thread CPU per (loop iteration, open in flight), from every callback run.

    Iterations are counted by the probe's turns (it runs once per iteration). Only opens
    still in flight are charged: a terminal's reader stays tagged after its open returned.
    """

    def __init__(self, probe: Probe) -> None:
        self._probe = probe
        self.in_flight: set[int] = set()
        self.charged: dict[int, float] = {}  # loop iteration * _KEY_SPAN + open -> cpu
        self._original = asyncio.events.Handle._run

    def install(self) -> None:
        original, probe = self._original, self._probe
        charged, in_flight = self.charged, self.in_flight
        cpu = time.thread_time

        def run(handle: asyncio.events.Handle) -> None:
            context = handle._context  # type: ignore[attr-defined]
            owner = context.get(_OPEN) if context is not None else None
            if owner is None or owner not in in_flight:
                original(handle)
                return
            started = cpu()
            original(handle)
            spent = cpu() - started  # before anything here allocates
            # An int key: no tuple for the collector to track (and to pass over).
            key = probe.turns * _KEY_SPAN + owner
            charged[key] = charged.get(key, 0.0) + spent

        asyncio.events.Handle._run = run  # type: ignore[method-assign]

    def uninstall(self) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]

    def caused(self) -> dict[int, float]:
        """Per open, the largest CPU its callbacks took in one loop iteration."""
        worst: dict[int, float] = {}
        for key, spent in self.charged.items():
            owner = key % _KEY_SPAN
            if spent > worst.get(owner, 0.0):
                worst[owner] = spent
        return worst


class Probe:
    """Records every gap between consecutive loop turns of a spinning task, and every
    pass of the cyclic garbage collector (which stalls any Python loop, opening or not)."""

    def __init__(self) -> None:
        # (start, end, loop-thread cpu) of each gap, flat: the probe allocates no object the
        # garbage collector tracks, so it triggers no collection pass of its own.
        self.gaps = array.array("d")
        # (start, end, loop-thread cpu): a pass on another thread holds the GIL too
        self.collections: list[tuple[float, float, float]] = []
        self._gc_started = (0.0, 0.0)
        self._loop_thread = threading.get_ident()
        self._stop = False
        self._task: asyncio.Task[None] | None = None
        self.turns = 0

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._spin())

    async def stop(self) -> None:
        self._stop = True
        assert self._task is not None
        await self._task
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = (time.perf_counter(), time.thread_time())
            return
        started, cpu_started = self._gc_started
        on_loop = threading.get_ident() == self._loop_thread
        cpu = time.thread_time() - cpu_started if on_loop else 0.0
        self.collections.append((started, time.perf_counter(), cpu))

    def _collection_time(self, start: float, end: float) -> tuple[float, float]:
        """(wall, loop-thread cpu) of garbage collection inside ``[start, end]``."""
        wall = cpu = 0.0
        for c_start, c_end, c_cpu in self.collections:
            if c_end >= start and c_start <= end:
                wall += min(c_end, end) - max(c_start, start)
                cpu += c_cpu
        return wall, cpu

    async def _spin(self) -> None:
        wall, cpu = time.perf_counter, time.thread_time
        last_w, last_c = wall(), cpu()
        while not self._stop:
            await asyncio.sleep(0)
            self.turns += 1
            now_w, now_c = wall(), cpu()
            if now_w - last_w > 50e-6:  # keep only what could matter (> 50 us)
                self.gaps.extend((last_w, now_w, now_c - last_c))
            last_w, last_c = now_w, now_c

    def worst(self, start: float, end: float, *, gc_too: bool = True) -> tuple[float, float]:
        """(longest gap, its loop-thread CPU) overlapping ``[start, end]``, in seconds;
        without ``gc_too``, garbage-collection time inside each gap is taken out of it."""
        best = (0.0, 0.0)
        gaps = self.gaps
        for i in range(0, len(gaps), 3):
            g_start, g_end, g_cpu = gaps[i], gaps[i + 1], gaps[i + 2]
            if g_end < start or g_start > end:
                continue
            wall, cpu = g_end - g_start, g_cpu
            if not gc_too:
                gc_wall, gc_cpu = self._collection_time(g_start, g_end)
                wall, cpu = wall - gc_wall, max(0.0, cpu - gc_cpu)
            if wall > best[0]:
                best = (wall, cpu)
        return best


async def _open_provider() -> tuple[Any, Any]:
    from dsh_terminal_core.provider import LocalTerminalProvider, TerminalSpawnSpec

    provider = LocalTerminalProvider()

    async def open_one() -> Any:
        return await provider.spawn_terminal(
            TerminalSpawnSpec(argv=["bash", "--noprofile", "--norc", "-i"], env={"PS1": "$ "})
        )

    async def close_one(process: Any) -> None:
        await process.terminate()

    return open_one, close_one


async def _open_service(harness: Any, agent: Any) -> tuple[Any, Any]:
    from dsh_terminal_core.registry import SpawnRequest

    registry = harness.ctx.terminals

    async def open_one() -> Any:
        return (await registry.spawn(agent, SpawnRequest(type="shell"))).session_id

    async def close_one(session_id: Any) -> None:
        await registry.kill(agent, session_id, "benchmark")

    return open_one, close_one


async def _worker(level: str, spawner: str, batches: int, concurrency: int) -> dict[str, Any]:
    from _stack import stack_config

    from dsh_terminal_core.kernel.harness import Harness

    _choose_spawner(spawner)
    harness = Harness(config=stack_config())
    await harness.start()
    agent = harness.create_agent(f"loop-lag-{os.getpid()}")
    try:
        if level == "provider":
            open_one, close_one = await _open_provider()
        else:
            open_one, close_one = await _open_service(harness, agent)
        probe = Probe()
        probe.start()
        await asyncio.sleep(0.05)
        # First open: includes starting the fork server (on its thread).
        t0 = time.perf_counter()
        first = await open_one()
        t1 = time.perf_counter()
        await close_one(first)
        first_stall = probe.worst(t0, t1)
        attribution = Attribution(probe)
        attribution.install()
        # Idle: the same probe, nothing opening, for as long as the batches will take.
        idle_windows: list[tuple[float, float]] = []
        reference: list[tuple[float, float]] = []
        opens: list[tuple[float, float]] = []
        for _ in range(batches):
            starts = [0.0] * concurrency
            ends = [0.0] * concurrency

            async def timed(i: int, starts: list[float] = starts, ends: list[float] = ends) -> Any:
                starts[i] = time.perf_counter()
                try:
                    return await open_one()
                finally:
                    ends[i] = time.perf_counter()
                    attribution.in_flight.discard(len(opens) + i)

            tasks = []
            for i in range(concurrency):
                # Each open runs in a context of its own, tagged before its first step.
                number = len(opens) + i
                context = contextvars.copy_context()
                context.run(_OPEN.set, number)
                attribution.in_flight.add(number)
                tasks.append(asyncio.get_running_loop().create_task(timed(i), context=context))
            handles = await asyncio.gather(*tasks)
            opens.extend(zip(starts, ends, strict=True))
            for handle in handles:
                await close_one(handle)
            span = max(ends) - min(starts)
            idle_start = time.perf_counter()
            await asyncio.sleep(span)
            idle_windows.append((idle_start, idle_start + span))
            reference.append(_reference_cold_and_warm())
            await asyncio.sleep(span)  # the next batch starts cold again
        await probe.stop()
        attribution.uninstall()
    finally:
        await harness.aclose()
    per_open = [probe.worst(s, e) for s, e in opens]
    caused = attribution.caused()
    no_gc = [probe.worst(s, e, gc_too=False) for s, e in opens]
    idle = [probe.worst(s, e)[0] for s, e in idle_windows]
    first, last = opens[0][0], opens[-1][1]
    gc_passes = [
        (c_end - c_start) for c_start, c_end, _ in probe.collections if first <= c_start <= last
    ]
    return {
        "level": level,
        "spawner": spawner,
        "opens": len(opens),
        "stall_ms": _ms([w for w, _ in per_open]),
        "on_cpu_ms": _ms([c for _, c in per_open]),
        "caused_cpu_ms": _ms([caused.get(number, 0.0) for number in range(len(opens))]),
        "stall_no_gc_ms": _ms([w for w, _ in no_gc]),
        "on_cpu_no_gc_ms": _ms([c for _, c in no_gc]),
        "gc_passes": len(gc_passes),
        "gc_max_ms": max(gc_passes, default=0.0) * 1000,
        "idle_ms": _ms(idle),
        "reference_cold_ms": _ms([cold for cold, _ in reference]),
        "reference_warm_ms": _ms([warm for _, warm in reference]),
        "open_ms": _ms([e - s for s, e in opens]),
        "first_open": {
            "open_ms": (t1 - t0) * 1000,
            "stall_ms": first_stall[0] * 1000,
            "on_cpu_ms": first_stall[1] * 1000,
        },
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


@attrs.frozen
class _Item:
    number: int
    name: str
    tags: tuple[str, ...] = ()


def _reference_step() -> int:
    """A fixed piece of ordinary loop work (objects, a dict, a stat, JSON), about as long
    as one step of an open when warm."""
    items: dict[str, _Item] = {}
    for i in range(40):
        item = _Item(i, str(i))
        items[item.name] = attrs.evolve(item, number=i + 1)
    os.stat(os.curdir)
    return len(json.dumps({"numbers": [item.number for item in items.values()]}))


def _reference_cold_and_warm() -> tuple[float, float]:
    """Loop-thread CPU of the reference step run first after an idle window (cold) and at
    once again (warm): what this machine charges any step for running from cold caches.
    """
    cpu = time.thread_time
    started = cpu()
    _reference_step()
    middle = cpu()
    _reference_step()
    return middle - started, cpu() - middle


def _choose_spawner(spawner: str) -> str:
    """Make ``spawner`` the default of every provider this worker creates (the harness
    builds its provider with no arguments); the worker process runs one row only.

    ``before`` is the path as it was: an in-process fork, and each open's loop work done
    as soon as it is ready (opens started together all fork in one loop iteration).
    """
    from dsh_terminal_bash import backend
    from dsh_terminal_core.provider import LocalTerminalProvider, forkclient, ptyspawn, terminal
    from dsh_terminal_core.registry import service

    if spawner == "before":

        @contextlib.asynccontextmanager
        async def no_turn() -> AsyncIterator[None]:
            yield

        async def no_take() -> None:
            pass

        ptyspawn.loop_turn = terminal.loop_turn = no_turn  # type: ignore[assignment]
        for module in (service, forkclient, backend):
            module.take_turn = no_take  # type: ignore[attr-defined]
        spawner = "in-process"
    defaults = LocalTerminalProvider.__init__.__defaults__
    assert defaults is not None and defaults[-1] == "fork-server"
    LocalTerminalProvider.__init__.__defaults__ = (*defaults[:-1], spawner)
    return spawner


def _ms(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    return {
        "p50": percentile(ms, 50),
        "p99": percentile(ms, 99),
        "max": max(ms) if ms else float("nan"),
    }


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| level | spawner | opens | caused p50 | caused p99 | caused max "
        "| reference cold p50 / p99 (warm p50) "
        "| stall p50 | stall p99 | stall max | on-CPU p99 "
        "| no-GC stall p99 | no-GC on-CPU p99 | GC passes (max) | idle p99 | idle max "
        "| open p50 | first open (stall) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        s, c, i, o, f = r["stall_ms"], r["on_cpu_ms"], r["idle_ms"], r["open_ms"], r["first_open"]
        ns, nc, k = r["stall_no_gc_ms"], r["on_cpu_no_gc_ms"], r["caused_cpu_ms"]
        rc, rw = r["reference_cold_ms"], r["reference_warm_ms"]
        lines.append(
            f"| {r['level']} | {r['spawner']} | {r['opens']} | {k['p50']:.2f} | {k['p99']:.2f} "
            f"| {k['max']:.2f} | {rc['p50']:.2f} / {rc['p99']:.2f} ({rw['p50']:.2f}) "
            f"| {s['p50']:.2f} | {s['p99']:.2f} "
            f"| {s['max']:.2f} | {c['p99']:.2f} | {ns['p99']:.2f} | {nc['p99']:.2f} "
            f"| {r['gc_passes']} ({r['gc_max_ms']:.1f}) | {i['p99']:.2f} | {i['max']:.2f} "
            f"| {o['p50']:.1f} | {f['open_ms']:.1f} ({f['stall_ms']:.2f}) |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--spawners", default=",".join(SPAWNERS))
    parser.add_argument("--quick", action="store_true", help="3 batches")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    parser.add_argument("--worker", nargs=2, metavar=("LEVEL", "SPAWNER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    batches = 3 if args.quick else args.batches
    if args.worker:
        level, spawner = args.worker
        result = asyncio.run(_worker(level, spawner, batches, args.concurrency))
        print(json.dumps(result))
        return 0
    rows = []
    load_before = load_average()
    for level in args.levels.split(","):
        for spawner in args.spawners.split(","):
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    level,
                    spawner,
                    "--batches",
                    str(batches),
                    "--concurrency",
                    str(args.concurrency),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                print(out.stdout, out.stderr, file=sys.stderr)
                return 1
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    report = {
        "machine": machine(),
        "load_before": load_before,
        "load_after": load_average(),
        "batches": batches,
        "concurrency": args.concurrency,
        "rows": rows,
    }
    print(
        f"loop stall per open, ms ({batches} batches x {args.concurrency} concurrent opens; "
        f"load {load_before[0]:.2f} -> {report['load_after'][0]:.2f}, "
        f"{report['machine']['nproc']} CPUs)"
    )
    print(_table(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
