"""One loop behind every event stream of the pages: push what changed, when it changes.

A stream's ``step`` pushes whatever differs from what it last pushed and says whether
the stream goes on. It runs at once, then whenever one of the stream's wake events is
set (output, control, a link's end), never by a clock — except the heartbeat comment
that keeps proxies from closing an idle stream, and ``poll_s`` for what announces no
change (the sessions an overview lists). Output faster than ``gap_s`` is pushed as one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from .respond import Receive, Send

__all__ = ["HEARTBEAT_S", "follow"]

HEARTBEAT_S = 15.0


async def follow(
    receive: Receive,
    send: Send,
    wakes: Iterable[asyncio.Event],
    step: Callable[[], Awaitable[bool]],
    *,
    gap_s: float = 0.0,
    poll_s: float | None = None,
) -> None:
    """Run ``step`` until it returns False, the client goes away, or a wake says closing."""
    gone = asyncio.Event()
    events = [*wakes, gone]

    async def until_gone() -> None:
        with contextlib.suppress(Exception):
            while (await receive())["type"] != "http.disconnect":
                pass
        gone.set()

    watcher = asyncio.ensure_future(until_gone())
    waits: dict[int, asyncio.Future[Any]] = {}
    loop = asyncio.get_running_loop()
    timeout = HEARTBEAT_S if poll_s is None else min(poll_s, HEARTBEAT_S)
    quiet = 0.0
    try:
        while not gone.is_set():
            for event in events:
                event.clear()
            pushed_at = loop.time()
            if not await step():
                break
            for index, event in enumerate(events):
                if index not in waits or waits[index].done():
                    waits[index] = asyncio.ensure_future(event.wait())
            done, _ = await asyncio.wait(
                set(waits.values()), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if done:
                quiet = 0.0
                if (wait := pushed_at + gap_s - loop.time()) > 0:
                    await asyncio.sleep(wait)  # a burst is pushed as one
                continue
            quiet += timeout
            if quiet >= HEARTBEAT_S:
                quiet = 0.0
                await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
    except (OSError, RuntimeError, asyncio.CancelledError):
        pass  # the page went away mid-write
    finally:
        for waiting in (*waits.values(), watcher):
            waiting.cancel()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
