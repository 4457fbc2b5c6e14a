"""One send in progress: its viewport, its incremental cursor, its settlement."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from dsh_terminal_core.registry import SendResult
from dsh_terminal_core.registry.linematch import LineMatcher

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
        # Plain attributes, not properties: the session reads both on every send.
        self.viewport = ViewportBuffer(max_bytes)
        self.done: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        # Futures handed out by result(), settled in the same step as done. The done
        # callback that releases them is added with the first one: most sends have none.
        self._waiters: list[asyncio.Future[SendResult]] = []
        self._canceller = canceller
        self._cancel_task: asyncio.Task[None] | None = None
        self.collecting = True
        self.input_cancelled = False
        self.write_task: asyncio.Task[None] | None = None
        # Unregisters this send from the caller's cancel token once it has ended, so a
        # token reused for many sends does not keep every finished one alive.
        self.forget_cancel: Callable[[], None] | None = None
        # The send's wait_for, fed what it collects; None for most sends.
        self.matcher: LineMatcher | None = None

    def append(self, text: str, newlines: int | None = None) -> None:
        if self.collecting:
            self.viewport.append(text, newlines)

    def read_output(self) -> str:
        """Output since the previous call; a background job's incremental cursor."""
        return self.viewport.read_new()[0]

    def cancel(self) -> asyncio.Task[None]:
        """Drop unwritten input, then SIGINT the foreground group; await to know it was sent.

        Idempotent: a second call returns the same in-flight cancellation.
        """
        if self._cancel_task is None:
            self.input_cancelled = True
            self._cancel_task = asyncio.get_running_loop().create_task(self._canceller(self))
        return self._cancel_task

    def cancel_unsettled(self, _reason: BaseException) -> None:
        """The caller's token was cancelled: :meth:`cancel`, unless the send has ended."""
        if not self.done.done():
            self.cancel()

    @property
    def cancel_task(self) -> asyncio.Task[None] | None:
        return self._cancel_task

    def result(self) -> asyncio.Future[SendResult]:
        """The result, for a caller that must not cancel the send by being cancelled.

        A fresh future, settled in the same step as :attr:`done` (awaiting
        ``shield(done)`` resumes the caller one loop turn later); cancelling it leaves
        the send alone.
        """
        waiter: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        if self.done.done():
            self._waiters.append(waiter)
            self._release_waiters(self.done)
            return waiter
        if not self._waiters:
            self.done.add_done_callback(self._release_waiters)
        self._waiters.append(waiter)
        return waiter

    def settle(self, result: SendResult) -> None:
        self._end(self.done.set_result, result)

    def fail(self, error: BaseException) -> None:
        """End the send with ``error`` instead of a result (nothing was typed)."""
        self._end(self.done.set_exception, error)

    def _end(self, finish: Callable[[Any], None], outcome: object) -> None:
        self.collecting = False
        if not self.done.done():
            # The waiters are released right here; the done callback (kept for a caller
            # that cancels ``done`` itself) would only run a turn later to find none.
            if self._waiters:
                self.done.remove_done_callback(self._release_waiters)
            finish(outcome)
            self._release_waiters(self.done)
        forget, self.forget_cancel = self.forget_cancel, None
        if forget is not None:
            forget()

    def _release_waiters(self, done: asyncio.Future[SendResult]) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if waiter.done():
                continue
            if done.cancelled():
                waiter.cancel()
            elif (error := done.exception()) is not None:
                waiter.set_exception(error)
            else:
                waiter.set_result(done.result())
