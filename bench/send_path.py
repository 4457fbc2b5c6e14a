#!/usr/bin/env python3
"""Where a tool-level send's wall time goes, stage by stage, on one session.

    python3 bench/send_path.py                   # 3000 sends of echo hi
    python3 bench/send_path.py --sends 5000 --text pwd

Each send is stamped at five points: ``call_tool`` called, the input written (before
and after the PTY write), the first and the last piece of output handed to the session,
that last piece handled (sanitized, kept, proven, settled), and ``call_tool`` returned.
The stages between them, as medians over the sends:

* call to write: the tool and service layers and the send's start (the write fence, the
  wake counts and the foreground look the proofs need from before the input);
* the write: the PTY write system call;
* write to first output: the shell's time (woken, reading the line, running it), plus
  whatever of ours runs after the write on the same CPU;
* first to last output: the shell printing the rest and its prompt;
* handling the last piece: sanitizing and keeping it, the prompt proofs (their system
  calls included) and the settlement;
* handled to return: the loop turn that resumes the caller, the result value and text.

The stamps come from the session's own hooks: the output handler is replaced by one that
stamps and calls the session's, and the process's ``write_now`` is wrapped, so the
stack's code runs unchanged. A stamp costs well under a microsecond; the stages are for
comparing with each other and with the contenders' round trips (``run.py``'s latency
and cpu groups), not a second figure for the round trip itself.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stack import ToolDriver
from _stats import percentile

STAGES = (
    ("call to write", "called", "writing"),
    ("the write", "writing", "written"),
    ("write to first output", "written", "first"),
    ("first to last output", "first", "last"),
    ("handling the last piece", "last", "handled"),
    ("handled to return", "handled", "returned"),
    ("round trip", "called", "returned"),
)


class _Stamps:
    """The moments of the send in flight; the output hooks stamp into it."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.pieces = 0

    def clear(self) -> None:
        self.at = {}
        self.pieces = 0


def _instrument(session: Any, stamps: _Stamps) -> None:
    process = session._process
    handler = session._on_output
    write_now = process.write_now

    def stamped_output(data: bytes) -> None:
        now = time.perf_counter()
        stamps.at.setdefault("first", now)
        stamps.at["last"] = now
        stamps.pieces += 1
        handler(data)
        stamps.at["handled"] = time.perf_counter()

    def stamped_write(payload: bytes) -> int:
        stamps.at["writing"] = time.perf_counter()
        written: int = write_now(payload)
        stamps.at["written"] = time.perf_counter()
        return written

    process.set_output_handler(stamped_output)
    process.write_now = stamped_write


async def run(sends: int, text: str, warmup: int) -> None:
    driver = ToolDriver("send-path")
    await driver.start()
    try:
        session_id = await driver.open()
        stamps = _Stamps()
        _instrument(driver.session_object(session_id), stamps)
        try:
            for _ in range(warmup):
                await driver.send(session_id, text)
            rows: list[dict[str, float]] = []
            pieces: list[int] = []
            reasons: Counter[str] = Counter()
            for _ in range(sends):
                stamps.clear()
                called = time.perf_counter()
                reason = await driver.send(session_id, text)
                at = {**stamps.at, "called": called, "returned": time.perf_counter()}
                reasons[str(reason)] += 1
                if all(name in at for _, start, end in STAGES for name in (start, end)):
                    rows.append(at)
                    pieces.append(stamps.pieces)
        finally:
            await driver.close(session_id)
    finally:
        await driver.aclose()
    print(
        f"{text!r}: {len(rows)} of {sends} sends stamped at every stage, {dict(reasons)}, "
        f"pieces of output per send: median {statistics.median(pieces):.0f}, "
        f"mean {statistics.fmean(pieces):.2f}"
    )
    print("| stage | p50 us | p90 us |\n|---|---:|---:|")
    for name, start, end in STAGES:
        spans = [1e6 * (row[end] - row[start]) for row in rows]
        print(f"| {name} | {percentile(spans, 50):.1f} | {percentile(spans, 90):.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--text", default="echo hi")
    args = parser.parse_args()
    asyncio.run(run(args.sends, args.text, args.warmup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
