"""One send in progress: its viewport, its incremental cursor, its settlement."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from dsh_terminal_core.registry import SendResult
from dsh_terminal_core.registry.linematch import LineMatcher

from .callbacks import CALLBACKS_CONTEXT
from .viewport import ViewportBuffer

__all__ = ["BashSendOperation", "SendCanceller"]


class SendCanceller(Protocol):
    """What stops a send (the session): ``_cancel_op(op)`` interrupts it and keeps the
    interrupt in force until it settles (``interrupts.CancelEnforcement``)."""

    def _cancel_op(self, op: BashSendOperation) -> Coroutine[Any, Any, None]: ...


class BashSendOperation:
    """Implements :class:`~dsh_terminal_core.terminals.SendOperation` for the bash backend.

    Output is collected from the write until settlement; after that the operation stops
    collecting (later output still reaches the session's scrollback).
    """

    def __init__(self, max_bytes: int, canceller: SendCanceller) -> None:
        # Plain attributes, not properties: the session reads both on every send.
        self.viewport = ViewportBuffer(max_bytes)
        self.done: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()
        # Futures handed out by result(), settled in the same step as done: the first in
        # its own attribute (a send has one, its tool's), any later ones in a list, which
        # is never set without a first. The done callback that releases them is added
        # with the first one.
        self._waiter: asyncio.Future[SendResult] | None = None
        self._more_waiters: list[asyncio.Future[SendResult]] | None = None
        # Called in the step the send ends (``when_ended``): a world agent's settlement.
        self._on_end: list[Callable[[asyncio.Future[SendResult]], None]] | None = None
        # The session itself, not its bound method: one object fewer per send in flight.
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
        # Whether the terminal echoed the input as it was written (its modes then): only
        # then may the result drop the echoed line. Unknown until the write.
        self.echoed = False

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
            self._cancel_task = asyncio.get_running_loop().create_task(
                self._canceller._cancel_op(self)
            )
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
            self._settle_waiter(waiter, self.done)
            return waiter
        if self._waiter is None:
            self.done.add_done_callback(self._release_waiters, context=CALLBACKS_CONTEXT)
            self._waiter = waiter
        elif self._more_waiters is None:
            self._more_waiters = [waiter]
        else:
            self._more_waiters.append(waiter)
        return waiter

    def when_ended(self, callback: Callable[[asyncio.Future[SendResult]], None]) -> None:
        """Call ``callback(done)`` in the step the send ends (now if it has ended), not a
        loop turn later as a done callback would (``SettleNotifying``)."""
        if self.done.done():
            callback(self.done)
        elif self._on_end is None:
            self._on_end = [callback]
        else:
            self._on_end.append(callback)

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
            if self._waiter is not None:
                self.done.remove_done_callback(self._release_waiters)
            finish(outcome)
            self._release_waiters(self.done)
            ended, self._on_end = self._on_end, None
            for callback in ended or ():
                callback(self.done)
        forget, self.forget_cancel = self.forget_cancel, None
        if forget is not None:
            forget()

    def _release_waiters(self, done: asyncio.Future[SendResult]) -> None:
        first, more = self._waiter, self._more_waiters
        self._waiter = self._more_waiters = None
        if first is not None:
            self._settle_waiter(first, done)
        for waiter in more or ():
            self._settle_waiter(waiter, done)

    @staticmethod
    def _settle_waiter(
        waiter: asyncio.Future[SendResult], done: asyncio.Future[SendResult]
    ) -> None:
        """End ``waiter`` as ``done`` ended; a waiter its caller cancelled stays so."""
        if waiter.done():
            return
        if done.cancelled():
            waiter.cancel()
        elif (error := done.exception()) is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(done.result())
