"""The event loop a world agent runs on: uvloop where it is installed.

A world agent does little but turn its loop: read a frame, write a terminal, read the
terminal, write a frame, each a wake-up and a callback. uvloop does those turns and that
I/O in C. Measured on the agent alone (three alternating pairs of 1,500 ``echo`` sends
through a world daemon, 2026-12-08): p50 0.89–0.92 ms on asyncio, 0.87–0.88 on uvloop.
The harness keeps whatever loop its host runs: that is the host's choice, not ours.

It comes with the ``world`` extra (``pip install 'dsh-terminal-core[world]'``, what the
workload image installs); without it, or with ``DSH_TERMINAL_LOOP=asyncio``, the agent
runs on the standard loop, with the same behaviour.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LOOP_ENV", "run_loop"]

#: ``asyncio`` keeps the standard loop even where uvloop is installed.
LOOP_ENV = "DSH_TERMINAL_LOOP"

_T = TypeVar("_T")


def run_loop(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(main)``, on uvloop when it is installed and not turned off."""
    if os.environ.get(LOOP_ENV, "").strip().lower() != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)
