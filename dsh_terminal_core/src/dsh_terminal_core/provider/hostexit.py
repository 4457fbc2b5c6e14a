"""Force-kill every live terminal when the host process exits.

Normal shutdown awaits ``terminate()`` on each session. This hook is the backstop for a
host that exits without doing so (an unhandled exception, ``sys.exit`` from a callback):
at interpreter exit there is no event loop left to await anything, so it SIGKILLs each
live session's captured tree and its PTY child synchronously and does not wait.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from typing import Protocol

__all__ = ["HostExitKillable", "kill_all_sync", "register", "unregister"]


class HostExitKillable(Protocol):
    def kill_sync(self) -> None:
        """SIGKILL this session's tree and PTY child without waiting or raising."""
        ...


_lock = threading.Lock()
_live: dict[int, HostExitKillable] = {}
_hooked = False


def register(process: HostExitKillable) -> None:
    """Track ``process`` until :func:`unregister`; installs the ``atexit`` hook once."""
    global _hooked
    with _lock:
        _live[id(process)] = process
        if not _hooked:
            atexit.register(kill_all_sync)
            _hooked = True


def unregister(process: HostExitKillable) -> None:
    """Stop tracking ``process`` (it was torn down); unknown processes are ignored."""
    with _lock:
        _live.pop(id(process), None)


def kill_all_sync() -> int:
    """SIGKILL every live session's tree and PTY child now; return how many were hit.

    Safe to call from any thread and more than once. Sessions stay registered: their
    owners still reap the children and close the descriptors when their loop runs.
    """
    with _lock:
        targets = list(_live.values())
    for process in targets:
        # One broken session must not shield the others.
        with contextlib.suppress(Exception):
            process.kill_sync()
    return len(targets)
