#!/usr/bin/env python3
"""One session, N sequential sends: CPU time of this process per send, for profiling.

    python3 bench/profile_send.py --level tool --sends 1000
    py-spy record -r 500 -f raw -o /tmp/send.raw -- python3 bench/profile_send.py
    pyinstrument bench/profile_send.py --level service

CPU per send (user+sys of this process, ``time.process_time``) is printed for the timed
sends only; startup and warm-up are outside it, and a profiler sampling the whole run
sees them too (filter on the event loop's frames).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import ServiceDriver, ToolDriver


async def run(level: str, sends: int, text: str, warmup: int) -> None:
    driver = ToolDriver("profile-send") if level == "tool" else ServiceDriver("profile-send")
    await driver.start()
    try:
        session = await driver.open()
        try:
            for _ in range(warmup):
                await driver.send(session, text)
            reasons: Counter[str | None] = Counter()
            cpu = time.process_time()
            wall = time.perf_counter()
            for _ in range(sends):
                reasons[await driver.send(session, text)] += 1
            cpu = time.process_time() - cpu
            wall = time.perf_counter() - wall
        finally:
            await driver.close(session)
    finally:
        await driver.aclose()
    print(
        f"{level} {text!r}: CPU {cpu / sends * 1e6:.0f} us/send, "
        f"wall {wall / sends * 1e3:.2f} ms/send, {dict(reasons)}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", choices=("service", "tool"), default="tool")
    parser.add_argument("--sends", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--text", default="echo hi")
    args = parser.parse_args()
    asyncio.run(run(args.level, args.sends, args.text, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
