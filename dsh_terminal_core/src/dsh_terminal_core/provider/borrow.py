"""Questions only a descriptor can answer, asked through a copy of another process's.

``/proc`` names a PTY master ``/dev/ptmx`` and cannot say what it holds: opening that path
makes a new terminal, and the bytes a program's inner terminal (mc's subshell, a tmux
pane, a screen window) has written but its master's holder has not read yet are visible
only through that very master. Likewise the process at the other end of a unix socket is
known only to the socket (``SO_PEERCRED``). ``pidfd_getfd`` (Linux 5.6+) copies a
descriptor of another process into this one: the same open file, no new open, nothing
read out of it. The copy is closed at once after the question; the program's own
descriptor is untouched. It needs the right to trace the process (the same user, or
``CAP_SYS_PTRACE``); where it is refused every answer is "unknown" (None), which callers
treat as no proof.

What is asked of a PTY master (:func:`pty_state`): bytes the inner programs wrote that
the master's holder has not read (the master polled first, so work in flight inside the
PTY layer is flushed before the count, as :mod:`.ptyio` does for the session's own
master); bytes written to the master that no inner program has read (the slave's input
queue, through a peer opened with ``TIOCGPTPEER``, ``O_NOCTTY``); the inner terminal's
foreground group (``TIOCGPGRP`` on the master answers for the slave); and the slave's
identity, to know its descriptors in other processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import select
import socket
import struct
import termios
from collections.abc import Iterator

import attrs

__all__ = ["PtyState", "borrowed", "drained_pipe", "pty_state", "socket_peer_pid"]

_PIDFD_GETFD = 438  # the same number on every architecture (asm-generic and x86_64)
_TIOCGPTPEER = 0x5441
_INT = struct.Struct("i")
_UCRED = struct.Struct("iII")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
_HANGUP = select.POLLHUP | select.POLLERR | select.POLLNVAL

try:
    _syscall = ctypes.CDLL(None, use_errno=True).syscall
except (OSError, AttributeError):  # pragma: no cover - not a glibc/musl system
    _syscall = None


@attrs.frozen(kw_only=True)
class PtyState:
    """What a PTY master holds now (see the module docstring)."""

    pending_output: int
    unread_input: int
    foreground: int
    slave: tuple[int, int]  # (st_dev, st_ino) of the slave


@contextlib.contextmanager
def borrowed(pid: int, fd: int) -> Iterator[int | None]:
    """A copy of ``pid``'s descriptor ``fd`` for the block (None when it cannot be had)."""
    copy = _borrow(pid, fd)
    try:
        yield copy
    finally:
        if copy is not None:
            with contextlib.suppress(OSError):
                os.close(copy)


def _borrow(pid: int, fd: int) -> int | None:
    if _syscall is None or not hasattr(os, "pidfd_open"):
        return None
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return None
    try:
        copy = int(_syscall(_PIDFD_GETFD, pidfd, fd, 0))
    finally:
        os.close(pidfd)
    return copy if copy >= 0 else None


def drained_pipe(pid: int, fd: int) -> bool:
    """True if ``pid``'s ``fd`` is a pipe's read end that is empty with no writer left.

    Such a pipe reports a hang-up and nothing to read: nothing can ever arrive on it (a
    pipeline's first stage has exited, ``seq 100 | fzf``). Asked through a copy, since
    opening it again through ``/proc`` would make this process a reader of it.
    """
    with borrowed(pid, fd) as copy:
        if copy is None:
            return False
        try:
            if fcntl.fcntl(copy, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY:
                return False  # a write end
            poller = select.poll()
            poller.register(copy, select.POLLIN)
            events = [event for _fd, event in poller.poll(0)]
        except OSError:
            return False
        hung_up = bool(events) and all(
            event & select.POLLHUP and not event & select.POLLIN for event in events
        )
        return hung_up and _count(copy) == 0


def socket_peer_pid(sock: int) -> int | None:
    """The pid the kernel recorded for the other end of unix socket ``sock``.

    That is the process that created the other end (``listen``, ``connect`` or
    ``socketpair``), which may since have exited or passed it on: callers confirm that
    the pid holds the other end now.
    """
    try:
        with socket.socket(fileno=os.dup(sock)) as view:
            raw = view.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError:
        return None
    pid = int(_UCRED.unpack(raw)[0])
    return pid if pid > 0 else None


def pty_state(master: int) -> PtyState | None:
    """What the PTY master ``master`` holds now; None when any of it cannot be read."""
    try:
        poller = select.poll()
        poller.register(master, select.POLLIN)
        events = [event for _fd, event in poller.poll(0)]
        if any(event & _HANGUP for event in events):
            return None
        pending = _count(master) if any(event & select.POLLIN for event in events) else 0
        foreground = _int_ioctl(master, termios.TIOCGPGRP)
        peer = fcntl.ioctl(master, _TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        slave = os.fstat(peer)
        poller = select.poll()
        poller.register(peer, select.POLLIN)
        events = [event for _fd, event in poller.poll(0)]
        if any(event & _HANGUP for event in events):
            return None
        unread = _count(peer)
    except OSError:
        return None
    finally:
        os.close(peer)
    if pending is None or unread is None or foreground is None:
        return None
    return PtyState(
        pending_output=pending,
        unread_input=unread,
        foreground=foreground,
        slave=(slave.st_dev, slave.st_ino),
    )


def _count(fd: int) -> int | None:
    try:
        raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return None
    return int(_INT.unpack(raw)[0])


def _int_ioctl(fd: int, request: int) -> int | None:
    try:
        raw = fcntl.ioctl(fd, request, b"\0\0\0\0")
    except OSError:
        return None
    return int(_INT.unpack(raw)[0])
