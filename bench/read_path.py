#!/usr/bin/env python3
"""CPU per MB of the PTY read path alone: ``PtyChannel`` beside a plain reader.

    python3 bench/read_path.py              # 6 runs of each reader, seq 1 2000000 (~15 MB)
    python3 bench/read_path.py --quick      # 2 runs of each, seq 1 100000 (the smoke test)

``run.py``'s throughput scenario measures a whole send: the shell, the sanitizer, the
scrollback. Between two runs here its raw reader's CPU per MB moves by more than a third,
far more than a change to how the master is read costs, so a read-path change can hide
in it. This isolates that path. ``seq`` writes into a PTY in raw mode, and the master is
read to EOF either by a plain reader (a loop reader callback that reads until EAGAIN and
counts the bytes) or by a ``PtyChannel`` whose handler only counts them. The two
alternate in one process, and the table gives each one's median CPU per MB (this
process's user+sys; the writer's CPU is its own) and the ratio between them.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import os
import statistics
import subprocess
import time
import tty
from collections.abc import Awaitable, Callable

from dsh_terminal_core.provider.ptyio import READ_CHUNK, PtyChannel


async def _start_writer(count: int) -> tuple[asyncio.subprocess.Process, int]:
    """``seq 1 count`` writing into a raw-mode PTY; returns it and the non-blocking master."""
    master, slave = os.openpty()
    try:
        tty.setraw(slave)
        writer = await asyncio.create_subprocess_exec(
            "seq", "1", str(count), stdin=subprocess.DEVNULL, stdout=slave
        )
    finally:
        os.close(slave)
    os.set_blocking(master, False)
    return writer, master


async def plain_reader(master: int, writer: asyncio.subprocess.Process) -> int:
    """Read the master until EOF the plainest way asyncio offers; the bytes read."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    total = 0

    def readable() -> None:
        nonlocal total
        while True:
            try:
                chunk = os.read(master, READ_CHUNK)
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno != errno.EIO:
                    raise
                chunk = b""
            if not chunk:  # every slave descriptor is closed: the end
                loop.remove_reader(master)
                if not done.done():
                    done.set_result(None)
                return
            total += len(chunk)

    loop.add_reader(master, readable)
    await done
    await writer.wait()
    os.close(master)
    return total


async def channel_reader(master: int, writer: asyncio.subprocess.Process) -> int:
    """Read the master through ``PtyChannel``; once the writer has exited, drain to EOF."""
    channel = PtyChannel(asyncio.get_running_loop(), master)
    total = 0

    def count(chunk: bytes) -> None:
        nonlocal total
        total += len(chunk)

    channel.set_handler(count)
    channel.start()
    try:
        await writer.wait()
        for _ in range(1000):  # each drain reads up to its limit; EOF follows the last byte
            if channel.eof:
                break
            channel.drain()
        assert channel.eof, "the master never reported EOF after the writer exited"
    finally:
        channel.close()
    return total


Reader = Callable[[int, asyncio.subprocess.Process], Awaitable[int]]


async def one_run(reader: Reader, count: int) -> float:
    """CPU ms per MB of one read of ``seq 1 count`` by ``reader``."""
    writer, master = await _start_writer(count)
    cpu = time.process_time()
    try:
        total = await reader(master, writer)
    finally:
        if writer.returncode is None:
            writer.kill()
            await writer.wait()
    cpu = time.process_time() - cpu
    return cpu * 1000 / (total / 1e6)


async def main(runs: int, count: int) -> None:
    readers: dict[str, Reader] = {"plain reader": plain_reader, "PtyChannel": channel_reader}
    results: dict[str, list[float]] = {name: [] for name in readers}
    await one_run(plain_reader, min(count, 10000))  # first-use costs outside the figures
    for _ in range(runs):
        for name, reader in readers.items():
            results[name].append(await one_run(reader, count))
    floor = statistics.median(results["plain reader"])
    print(f"`seq 1 {count}` read to EOF, {runs} alternating runs of each reader\n")
    print("| reader | CPU ms per MB (median) | runs | x plain reader |")
    print("|---|---:|---|---:|")
    for name, values in results.items():
        median = statistics.median(values)
        spread = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {median:.2f} | {spread} | {median / floor:.2f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 runs of 100,000 lines")
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--lines", type=int, default=2_000_000)
    options = parser.parse_args()
    if options.quick:
        options.runs, options.lines = 2, 100_000
    asyncio.run(main(options.runs, options.lines))
