#!/usr/bin/env python3
"""CPU the tool layer adds to a send: the same session driven through ``ctx.terminals`` and
through ``terminal_send``, in interleaved blocks of one process.

    python3 bench/tool_layer.py                  # 20 rounds x 100 sends per level
    python3 bench/tool_layer.py --rounds 40 --block 200

Each round runs a block of service-level sends (``start_send`` + ``await op.done``) and a
block of tool-level sends (``call_tool``), in alternating order, and takes the CPU time
(user+sys of this process) of each block. The figure to read is the median of the
per-round differences: both levels share the process, the shell, the caches and the
machine's load of that moment, so the difference is what the tool layer (argument check,
request, result value and text) costs on top of the service. Separate runs of
``profile_send.py`` or ``run.py`` carry differences of tens of microseconds between
processes on a busy machine, larger than the layer itself.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import ToolDriver
from _stats import percentile

from dsh_terminal_core.registry import SendRequest


async def run(rounds: int, block: int, text: str, warmup: int) -> None:
    driver = ToolDriver("tool-layer")
    await driver.start()
    try:
        session = await driver.open()
        try:
            cpu = await _interleaved(driver, session, rounds, block, text, warmup)
        finally:
            await driver.close(session)
    finally:
        await driver.aclose()
    service, tool = cpu["service"], cpu["tool"]
    layer = [t - s for t, s in zip(tool, service, strict=True)]
    print(
        f"{text!r}, {rounds} rounds x {block} sends: CPU per send service "
        f"{statistics.median(service):.1f} us, tool {statistics.median(tool):.1f} us; "
        f"tool layer {statistics.median(layer):.1f} us "
        f"(per-round differences p25 {percentile(layer, 25):.1f}, "
        f"p75 {percentile(layer, 75):.1f})"
    )


async def _interleaved(
    driver: ToolDriver, session: str, rounds: int, block: int, text: str, warmup: int
) -> dict[str, list[float]]:
    harness, agent = driver.h, driver.agent
    terminals = harness.ctx.terminals

    async def service() -> None:
        await terminals.start_send(agent, session, SendRequest(text=text)).done

    async def tool() -> None:
        result = await harness.call_tool(
            agent, "terminal_send", {"sessionId": session, "text": text}
        )
        if result.is_error:
            raise RuntimeError(result.text)

    levels: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("service", service),
        ("tool", tool),
    ]
    for _name, send in levels:
        for _ in range(warmup):
            await send()
    cpu: dict[str, list[float]] = {name: [] for name, _ in levels}
    for round_ in range(rounds):
        for name, send in levels if round_ % 2 == 0 else levels[::-1]:
            began = time.process_time()
            for _ in range(block):
                await send()
            cpu[name].append((time.process_time() - began) / block * 1e6)
    return cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--text", default="echo hi")
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.block, args.text, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
