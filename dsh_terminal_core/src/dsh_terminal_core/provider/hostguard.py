"""Host side of the host-death guardian (see ``guardian.py``).

``hostexit`` covers a host that exits; this covers one that is killed. The guardian is
started lazily, once per host process, at the first terminal spawn; afterwards each
session start and teardown costs one small write to a pipe.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from .procfs import read_stat

__all__ = ["forget_session", "guard_session", "prestart"]

_GUARDIAN = Path(__file__).with_name("guardian.py")

_lock = threading.Lock()
_write_fd: int | None = None
_owner_pid: int | None = None


def _ensure_started() -> int | None:
    """The pipe to this process's guardian, starting it on first use; None if it cannot run."""
    global _write_fd, _owner_pid
    if _write_fd is not None and _owner_pid == os.getpid():
        return _write_fd
    # A forked child must not share its parent's guardian pipe: start its own.
    read_fd, write_fd = os.pipe()  # both close-on-exec: no shell inherits the write end
    try:
        child = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_GUARDIAN)],
            stdin=read_fd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            env={},  # it needs nothing, and must not look like one of the shells it guards
        )
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return None
    os.close(read_fd)
    # The guardian forks and its first process exits at once; reap that one off-loop.
    threading.Thread(target=child.wait, name="dsh-guardian-reap", daemon=True).start()
    _write_fd, _owner_pid = write_fd, os.getpid()
    return write_fd


def prestart() -> None:
    """Start the guardian now (from a thread that may block), so no event loop has to."""
    if not sys.platform.startswith("linux"):
        return
    with _lock:
        _ensure_started()


def _send(line: str) -> None:
    global _write_fd
    with _lock:
        fd = _ensure_started()
        if fd is None:
            return
        try:
            os.write(fd, line.encode())
        except OSError:
            # The guardian is gone (killed from outside); the next session starts another.
            with contextlib.suppress(OSError):
                os.close(fd)
            _write_fd = None


def guard_session(session_id: int) -> None:
    """Ask the guardian to kill POSIX session ``session_id`` if this host dies first."""
    if session_id <= 0 or not sys.platform.startswith("linux"):
        return
    stat = read_stat(session_id)
    if stat is None:
        return
    _send(f"+ {session_id} {stat.starttime}\n")


def forget_session(session_id: int) -> None:
    """The session was torn down; the guardian no longer needs to watch it."""
    if session_id <= 0 or _write_fd is None:
        return
    _send(f"- {session_id}\n")
