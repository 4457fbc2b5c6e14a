"""Cancellation tokens passed from callers down to sessions.

A :class:`Cancellation` is the Python counterpart of an abort signal: the caller owns it,
may cancel it with a reason, and every operation that received it stops and re-raises
that exact reason. asyncio task cancellation still works alongside it; the token exists
so a reason survives layers that roll back work before giving up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .errors import DshError, ErrorCode, OperationCancelled
from .subscribe import subscribe

__all__ = ["NEVER_CANCELLED", "Cancellation", "finish_shielded"]

_T = TypeVar("_T")


class Cancellation:
    """A one-shot cancellation signal carrying the reason the caller gave."""

    __slots__ = ("_callbacks", "_event", "_reason")

    def __init__(self) -> None:
        self._reason: BaseException | None = None
        self._callbacks: list[Callable[[BaseException], None]] = []
        self._event: asyncio.Event | None = None

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> BaseException | None:
        return self._reason

    def cancel(self, reason: BaseException | None = None) -> None:
        """Cancel with ``reason`` (default :class:`OperationCancelled`); later calls are ignored."""
        if self._reason is not None:
            return
        self._reason = reason if reason is not None else OperationCancelled("operation cancelled")
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self._reason)

    def raise_if_cancelled(self) -> None:
        """Raise the caller's reason if this token was cancelled."""
        if self._reason is not None:
            raise self._reason

    def on_cancel(self, callback: Callable[[BaseException], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` once on cancellation (at once if already cancelled).

        Returns a function that unregisters the callback.
        """
        if self._reason is not None:
            callback(self._reason)
            return _nothing_to_remove
        return subscribe(self._callbacks, callback)

    async def wait(self) -> BaseException:
        """Wait until cancelled; return the reason."""
        if self._reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        assert self._reason is not None
        return self._reason


class _NeverCancelled(Cancellation):
    """The token of a call whose caller gave none: nobody holds it, so it never fires.

    One is shared by every such call (``Harness.call_tool`` without ``cancel``). It keeps
    no callbacks, since none could ever run: that spares each in-process tool call a
    token, its list, a remover and a bound method, objects the garbage collector would
    otherwise traverse for as long as the call is in flight (with a thousand sends in
    flight its passes took about a tenth of the loop's time, ``bench/scale.py``).
    Cancelling it is refused: it is shared, and no caller could be waiting on it.
    """

    __slots__ = ()

    def cancel(self, reason: BaseException | None = None) -> None:
        raise DshError(
            "this call was made without a cancellation token, so it cannot be cancelled "
            "through one; pass cancel=Cancellation() to the call to be able to",
            ErrorCode.UNSUPPORTED,
        )

    def on_cancel(self, callback: Callable[[BaseException], None]) -> Callable[[], None]:
        return _nothing_to_remove

    async def wait(self) -> BaseException:
        await asyncio.get_running_loop().create_future()  # never set: waits until cancelled
        raise AssertionError("unreachable")


def _nothing_to_remove() -> None:
    pass


NEVER_CANCELLED: Cancellation = _NeverCancelled()
"""The token a call without one gets; it never fires and keeps nothing (see above)."""


async def finish_shielded(work: Awaitable[_T]) -> _T:
    """Await cleanup ``work`` to its end even if the caller is cancelled meanwhile.

    Abandoning a rollback or an interrupt half-way would leak the processes it was
    stopping, so a cancellation of the caller is held back until ``work`` is done and
    then raised (it wins over ``work``'s own result or failure). Without one, ``work``'s
    result is returned and its failure raised.
    """
    task = asyncio.ensure_future(work)
    interrupted = False
    while True:
        try:
            result = await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                raise
            interrupted = True
            continue
        except Exception:
            if interrupted:
                raise asyncio.CancelledError from None
            raise
        if interrupted:
            raise asyncio.CancelledError
        return result
