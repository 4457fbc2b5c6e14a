#!/usr/bin/env python3
"""The objects the garbage collector tracks for each tool send in flight, by type.

    python3 bench/inflight.py                 # 100 sessions, one `sleep 60` each
    python3 bench/inflight.py --sessions 20

With a thousand sends in flight (``bench/scale.py``), the collector's passes are a share
of the loop's time that grows with every object a send keeps alive while it waits: a
young pass is due whenever new objects outnumber freed ones by 700, and with sends
starting and ending in no order that count wanders in steps of one send's objects, so
the passes come more often the larger the step (26 → 16 objects per send took a
1,000-session run's young passes from 224 to 106–124, docs/speed.md).

Opens N sessions through the tools, sends each one ``sleep 60`` from a task of its own,
and while they run (they are cancelled once counted) lists the tracked objects that
were not there before: per send, by type (a coroutine or a bound method by its
function's name). The driver's own share
(its task, that task's context and weak reference, and its two coroutines,
``ToolDriver.send`` and ``ToolDriver._call``) is in the list too, as its own column; the
total without it is what each send costs a host that awaits ``call_tool``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import ToolDriver

__all__ = ["count", "main"]

# Per send, the driver's and not the stack's: its task, that task's context and its weak
# reference in asyncio's set of tasks, and its two coroutines.
_DRIVER = {
    "Task": 1,
    "Context": 1,
    "ReferenceType": 1,
    "coroutine ToolDriver.send": 1,
    "coroutine ToolDriver._call": 1,
}


def _kind(obj: object) -> str:
    name = type(obj).__qualname__
    if name == "coroutine":
        return f"coroutine {obj.cr_code.co_qualname}"  # type: ignore[attr-defined]
    if name == "method":
        return f"method {obj.__func__.__qualname__}"  # type: ignore[attr-defined]
    return name


async def count(sessions: int) -> tuple[Counter[str], int]:
    """Tracked objects per kind added while ``sessions`` sends are in flight, and the
    number of those sends."""
    driver = ToolDriver("bench-inflight")
    await driver.start()
    try:
        ids = [await driver.open() for _ in range(sessions)]
        for session_id in ids:
            await driver.send(session_id, "true")  # first-use work out of the way
        gc.collect()
        before = {id(obj) for obj in gc.get_objects()}
        # A command far longer than the count takes, so no send can settle before it,
        # even on a loaded machine; the sends are cancelled (the shell's Ctrl-C) after.
        sends = [asyncio.ensure_future(driver.send(session_id, "sleep 60")) for session_id in ids]
        try:
            await asyncio.sleep(0.4)  # every send written and its ladder's first looks made
            gc.collect()
            added = Counter(_kind(obj) for obj in gc.get_objects() if id(obj) not in before)
            settled = [send for send in sends if send.done()]
        finally:
            for send in sends:
                send.cancel()
            await asyncio.gather(*sends, return_exceptions=True)
        if settled:
            raise RuntimeError(f"{len(settled)} of {sessions} sends ended before the count")
        return added, sessions
    finally:
        await driver.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=100)
    args = parser.parse_args()
    added, sends = asyncio.run(count(args.sessions))
    print(f"{sends} tool sends in flight, tracked objects added per send:\n")
    print("| kind | per send | of them the driver's |")
    print("|---|---:|---:|")
    total = driver = 0.0
    for kind, number in sorted(added.items(), key=lambda item: (-item[1], item[0])):
        per_send = number / sends
        if per_send < 0.5:
            continue  # not one per send: the loop's and the sessions' own churn
        theirs = min(per_send, _DRIVER.get(kind, 0))
        total += per_send
        driver += theirs
        print(f"| {kind} | {per_send:.2f} | {theirs:g} |")
    print(f"\nper send: {total:.1f} in all, {total - driver:.1f} without the driver's")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
