"""Learn that a child exited, without reaping it and without polling.

On Linux a pidfd becomes readable when the process exits; the event loop watches it like
any other descriptor. Where ``pidfd_open`` is missing or refused (macOS, kernels before
5.3, seccomp filters) a daemon thread blocks in ``waitid(..., WEXITED | WNOWAIT)`` and
hands the event to the loop. Either way the child is left a zombie: the owner reaps it
after capturing what still belongs to the session, while the pid cannot be reused.

A child that is not this process's own (started by the fork server) can only be watched
through a pidfd; its pidfd is handed in and there is no thread fallback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable

__all__ = ["ExitWatch"]


class ExitWatch:
    """Call ``on_exit`` once, on the loop, after child ``pid`` has exited.

    ``pidfd`` is the child's pidfd while the watch holds one (None on the thread
    fallback); it lets the owner signal the child without any pid race. A ``pidfd``
    given here is owned by the watch from now on (closed by :meth:`close`).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        pid: int,
        on_exit: Callable[[], None],
        *,
        pidfd: int | None = None,
    ) -> None:
        self._loop = loop
        self._pid = pid
        self._on_exit = on_exit
        self._pidfd: int | None = pidfd
        self._fired = False
        self._closed = False

    @property
    def pidfd(self) -> int | None:
        return self._pidfd

    @property
    def uses_pidfd(self) -> bool:
        return self._pidfd is not None

    def start(self) -> None:
        """Begin watching; must be called on the loop's thread."""
        opener = getattr(os, "pidfd_open", None)
        if self._pidfd is None and opener is not None:
            try:
                self._pidfd = opener(self._pid)
            except OSError:
                self._pidfd = None
        if self._pidfd is not None:
            self._loop.add_reader(self._pidfd, self._fire)
            return
        waiter = threading.Thread(
            target=self._wait_in_thread, name=f"dsh-exitwatch-{self._pid}", daemon=True
        )
        waiter.start()

    def close(self) -> None:
        """Stop watching and release the pidfd; idempotent. Call before the child is reaped
        is fine; a pending thread wait simply finds nothing to report."""
        self._closed = True
        # The callback is usually a method of the watch's owner, which holds the watch:
        # dropping it lets a closed terminal be freed at once, not by a collector pass.
        self._on_exit = _nothing
        if self._pidfd is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None

    def _fire(self) -> None:
        if self._fired or self._closed:
            return
        self._fired = True
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
        self._on_exit()

    def _wait_in_thread(self) -> None:
        try:
            os.waitid(os.P_PID, self._pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass  # already reaped by the owner; _fire is then a no-op or still useful
        except OSError:
            return
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            self._loop.call_soon_threadsafe(self._fire)


def _nothing() -> None:
    pass
