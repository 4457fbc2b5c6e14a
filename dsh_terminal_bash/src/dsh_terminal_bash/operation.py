"""One send in progress: its viewport, its incremental cursor, its settlement."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from dsh_terminal_core.terminals import SendResult

from .viewport import ViewportBuffer

__all__ = ["BashSendOperation"]


class BashSendOperation:
    """Implements :class:`~dsh_terminal_core.terminals.SendOperation` for the bash backend.

    Output is collected from the write until settlement; after that the operation stops
    collecting (later output still reaches the session's scrollback).
    """

    def __init__(
        self, max_bytes: int, canceller: Callable[[BashSendOperation], Coroutine[Any, Any, None]]
    ) -> None:
        self._viewport = ViewportBuffer(max_bytes)
        self._done: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        self._canceller = canceller
        self._cancel_task: asyncio.Task[None] | None = None
        self.collecting = True
        self.input_cancelled = False
        self.write_task: asyncio.Task[None] | None = None

    @property
    def done(self) -> asyncio.Future[SendResult]:
        return self._done

    @property
    def viewport(self) -> ViewportBuffer:
        return self._viewport

    def append(self, text: str, newlines: int | None = None) -> None:
        if self.collecting:
            self._viewport.append(text, newlines)

    def read_output(self) -> str:
        """Output since the previous call; a background job's incremental cursor."""
        return self._viewport.read_new()[0]

    def cancel(self) -> asyncio.Task[None]:
        """Drop unwritten input, then SIGINT the foreground group; await to know it was sent.

        Idempotent: a second call returns the same in-flight cancellation.
        """
        if self._cancel_task is None:
            self.input_cancelled = True
            self._cancel_task = asyncio.get_running_loop().create_task(self._canceller(self))
        return self._cancel_task

    @property
    def cancel_task(self) -> asyncio.Task[None] | None:
        return self._cancel_task

    def settle(self, result: SendResult) -> None:
        self.collecting = False
        if not self._done.done():
            self._done.set_result(result)
