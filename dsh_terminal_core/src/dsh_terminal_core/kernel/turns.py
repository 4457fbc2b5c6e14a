"""Opens take turns on the event loop: one synchronous step of one open per iteration.

Each step of an open on the loop is small (checks and arguments to prepare, a request to
encode, a handle to build: tenths of a millisecond), but opens started together would
each do the same step in the same loop iteration, and 16 of them stall every other
session 16 times as long. A step that takes a turn starts in an iteration of its own,
after the step before it, and the next open's step waits for the next iteration, so other
tasks and callbacks run in between.

:func:`take_turn` is for a step that runs from the turn to the caller's next ``await``;
:func:`loop_turn` wraps a block. Neither ever suspends once the step has begun (no
cancellation point inside the step), so a step is never cut in half by another open.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

__all__ = ["loop_turn", "take_turn"]

_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]
_turns = weakref.WeakKeyDictionary()


async def take_turn() -> None:
    """Wait for a loop iteration of this step's own; it lasts until the caller's next await.

    The turn always starts at a later iteration than the caller's previous step (which
    may have been long: the receipt of an answer, another step of the same open), and
    it is handed on at the next iteration.
    """
    loop = asyncio.get_running_loop()
    lock = _turns.get(loop)
    if lock is None:
        lock = _turns[loop] = asyncio.Lock()
    if lock.locked():
        await lock.acquire()  # suspends: the step starts at a later iteration
    else:
        await lock.acquire()  # does not suspend, so the step waits one iteration holding it
        try:
            await asyncio.sleep(0)
        except BaseException:
            lock.release()
            raise
    loop.call_soon(lock.release)


@contextlib.asynccontextmanager
async def loop_turn() -> AsyncIterator[None]:
    """Run the block as one turn (see :func:`take_turn`); the block must not await."""
    await take_turn()
    yield
