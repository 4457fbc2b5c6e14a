"""Cost of the exact stdin-wait probe per look, for programs waiting in different ways.

```
python3 bench/probe_cost.py                              # 2000 looks back to back
python3 bench/probe_cost.py --looks 100 --spacing-ms 50  # at readiness's cadence
```

Each program runs on its own PTY and is left waiting; then ``inspect_foreground()`` (what
readiness calls on a send) is timed over many looks, in CPU time (user+sys of this
process) and wall time. The baseline, measured in the same run on the same process, is
the floor any ``/proc`` probe pays: reading the syscall line of each of its threads once.
The ratio to that floor is what to compare between machines and commits; absolute
microseconds move with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from dsh_terminal_core.provider import (
    LocalTerminalProcess,
    LocalTerminalProvider,
    TerminalSpawnSpec,
)

WAITER = str(Path(__file__).parents[1] / "tests" / "fixtures" / "waiter.py")
SHELL = ["/bin/bash", "--noprofile", "--norc", "-i"]


def _programs(port: int) -> list[tuple[str, list[str]]]:
    return [
        ("bash at its prompt", SHELL),
        ("python3 -q", [sys.executable, "-q"]),
        ("python3 -m asyncio", [sys.executable, "-q", "-m", "asyncio"]),
        ("node -i", ["node", "-i"]),
        ("gdb -q", ["gdb", "-q"]),
        ("self-pipe (select)", [sys.executable, WAITER, "selfpipe"]),
        ("socketpair (epoll)", [sys.executable, WAITER, "socketpair", "", "epoll"]),
        ("stdin + TCP (select)", [sys.executable, WAITER, "tcp", str(port)]),
    ]


@asynccontextmanager
async def _server() -> AsyncIterator[int]:
    async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(_hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def _floor(pid: int) -> Callable[[], object]:
    def look() -> object:
        lines = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as handle:
                lines.append(handle.read())
        return lines

    return look


async def _time(look: Callable[[], object], looks: int, spacing: float) -> tuple[float, float]:
    """Microseconds per look: (CPU, wall). With ``spacing`` (seconds) between looks, as
    readiness spaces them, only the looks themselves are timed."""
    cpu = wall = 0.0
    for _ in range(looks):
        if spacing:
            await asyncio.sleep(spacing)
        started_cpu, started_wall = time.process_time(), time.perf_counter()
        look()
        cpu += time.process_time() - started_cpu
        wall += time.perf_counter() - started_wall
    return cpu / looks * 1e6, wall / looks * 1e6


async def _settle(process: LocalTerminalProcess, seconds: float) -> None:
    """Let the program start and reach its wait (REPLs print, then wait)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen = process.inspect_foreground()
        if seen is not None and seen.input_waiting:
            await asyncio.sleep(0.5)
            return
        await asyncio.sleep(0.05)


async def main(looks: int, spacing_ms: float) -> None:
    provider = LocalTerminalProvider()
    spacing = spacing_ms / 1000
    print(f"load average: {os.getloadavg()}; {looks} looks per program, {spacing_ms} ms apart")
    print("| program | waiting | probe CPU µs | floor CPU µs | ratio | probe wall µs |")
    print("|---|---|---|---|---|---|")
    async with _server() as port:
        for name, argv in _programs(port):
            if shutil.which(argv[0]) is None:
                print(f"| {name} | not installed | | | | |")
                continue
            spec = TerminalSpawnSpec(argv=argv, env={"TERM": "dumb", "PS1": "$ "})
            process = await provider.spawn_terminal(spec)
            process.set_output_handler(lambda chunk: None)
            try:
                await _settle(process, 10)
                seen = process.inspect_foreground()
                waiting = bool(seen and seen.input_waiting)
                floor_cpu, _ = await _time(_floor(process.pid), looks, spacing)
                probe_cpu, probe_wall = await _time(process.inspect_foreground, looks, spacing)
                ratio = probe_cpu / floor_cpu if floor_cpu else float("nan")
                print(
                    f"| {name} | {waiting} | {probe_cpu:.1f} | {floor_cpu:.1f} | {ratio:.1f}x "
                    f"| {probe_wall:.1f} |"
                )
            finally:
                await process.terminate()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--looks", type=int, default=2000)
    parser.add_argument("--spacing-ms", type=float, default=0, help="pause between looks")
    args = parser.parse_args()
    asyncio.run(main(args.looks, args.spacing_ms))
