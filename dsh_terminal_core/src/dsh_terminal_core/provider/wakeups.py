"""Whether a blocked thread of a threaded program already has a wake-up coming.

A threaded program is waiting for keys only if *every* thread is blocked and nothing is
already on its way to any of them. Measured: nvim's input thread takes the keys
``:q!`` Enter, posts them to the main thread (an ``eventfd`` or a pipe that the main
thread's ``epoll`` watches) and goes back to waiting on the terminal 3-6 ms before the
main thread has run the command; a look at the input thread alone says "reading the
terminal". The post is the wake-up: until the main thread has taken it, it sits in one
of the descriptors below, readable. A woken thread is runnable at once (its state leaves
``S``), so the state check sees most of these; the descriptor check covers the wait
sets themselves (an event source already readable in the set a thread still sleeps on:
the wake-up on its way) and timers about to fire.

What "readable now" is read from, per kind of descriptor (all from ``/proc``, the
process's own descriptors; nothing is read out of them):

* ``eventfd``: its counter (``eventfd-count`` in ``fdinfo``) is not 0;
* ``timerfd``: it has expired unread (``ticks``), or it will within
  :data:`~.inspector_linux.SHORT_WAIT_NS` (``it_value``): a wait that a timer ends soon
  is no proof, as a short timeout is not;
* ``signalfd``: any queued signal at all makes the process not quiet (checked per
  thread from ``SigPnd``/``ShdPnd``), so its mask need not be read;
* a pipe: bytes in it (``FIONREAD`` on the pipe opened read-only through
  ``/proc/<pid>/fd``, which takes nothing out of it);
* a unix socket: bytes to read, or connections to accept (the kernel's socket
  diagnostics, :mod:`.unixdiag`);
* an ``epoll`` instance: any of the descriptors it watches, by the same rules;
* ``inotify``: not readable from outside; an event wakes its waiter, which the state
  and run-stamp checks see.

Anything that cannot be read counts as pending: "quiet" must be proven.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import struct
import termios
from collections.abc import Callable

from .procfiles import ProcessFiles, epoll_entries
from .unixdiag import UnixPeers

__all__ = ["has_pending_wakeup"]

_INT = struct.Struct("i")
_MAX_NESTING = 4


def has_pending_wakeup(
    files: ProcessFiles,
    fds: list[int],
    is_terminal: Callable[[int], bool],
    peers: UnixPeers,
    soon_ns: int,
) -> bool:
    """True if any of ``fds`` (of ``files.pid``) is readable now or will be within ``soon_ns``.

    ``is_terminal`` skips the session's terminal: its unread input is the readiness
    ladder's own fence.
    """
    return _any_pending(files, fds, is_terminal, peers, soon_ns, 0)


def _any_pending(
    files: ProcessFiles,
    fds: list[int],
    is_terminal: Callable[[int], bool],
    peers: UnixPeers,
    soon_ns: int,
    depth: int,
) -> bool:
    for fd in fds:
        if is_terminal(fd):
            continue
        link = files.link(fd)
        if link is None:
            return True
        if link.startswith("pipe:["):
            if _pipe_bytes(files, fd) != 0:
                return True
        elif link.startswith("socket:["):
            queued = peers.queued(_inode(link))
            if queued is None or queued:
                return True
        elif link == "anon_inode:[eventfd]":
            if _info_field(files, fd, "eventfd-count:", 16) != 0:
                return True
        elif link == "anon_inode:[timerfd]":
            if _timer_due(files, fd, soon_ns):
                return True
        elif link == "anon_inode:[eventpoll]":
            info = files.info(fd)
            entries = epoll_entries(info) if info is not None else None
            if entries is None or depth >= _MAX_NESTING:
                return True
            watched = [entry.fd for entry in entries if entry.armed]
            if _any_pending(files, watched, is_terminal, peers, soon_ns, depth + 1):
                return True
        # signalfd: any queued signal already fails the thread; inotify: see the module
        # docstring; regular files never hold a wait.
    return False


def _pipe_bytes(files: ProcessFiles, fd: int) -> int | None:
    """Bytes waiting in the pipe ``fd`` refers to; None when it cannot be opened.

    Opening ``/proc/<pid>/fd/<fd>`` opens the same pipe (not a copy of the descriptor),
    read-only and non-blocking: it never waits for a writer, reads nothing, and closing
    it again leaves the pipe's own readers and writers as they were.
    """
    try:
        peek = os.open(f"/proc/{files.pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = fcntl.ioctl(peek, termios.FIONREAD, b"\0\0\0\0")
        return int(_INT.unpack(raw)[0])
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(peek)


def _info_field(files: ProcessFiles, fd: int, name: str, base: int) -> int | None:
    info = files.info(fd)
    if info is None:
        return None
    for line in info.splitlines():
        if line.startswith(name):
            try:
                return int(line[len(name) :].strip(), base)
            except ValueError:
                return None
    return None


def _timer_due(files: ProcessFiles, fd: int, soon_ns: int) -> bool:
    """A timerfd that expired unread, or will expire within ``soon_ns`` (or is unreadable)."""
    info = files.info(fd)
    if info is None:
        return True
    ticks: int | None = None
    remaining: int | None = None
    for line in info.splitlines():
        if line.startswith("ticks:"):
            try:
                ticks = int(line[6:].strip())
            except ValueError:
                return True
        elif line.startswith("it_value:"):
            # ``it_value: (seconds, nanoseconds)``: the time left until it fires.
            numbers = line[9:].strip().strip("()").split(",")
            try:
                remaining = int(numbers[0]) * 1_000_000_000 + int(numbers[1])
            except (IndexError, ValueError):
                return True
    if ticks is None or remaining is None:
        return True
    return ticks != 0 or 0 < remaining <= soon_ns


def _inode(link: str) -> int:
    try:
        return int(link[link.index("[") + 1 : -1])
    except ValueError:
        return 0
