"""The input side of a PTY, seen from the master: what the program has not read yet.

Bytes written to the master reach the slave's input queue through the kernel's flip
buffer, which a work queue empties. Counting the slave's queue right after a write can
therefore say 0 while the bytes are still in flight. Polling the slave first settles
that: when the line discipline has no input to offer, its poll flushes the pending work
before it answers, so a count of 0 means no byte the master accepted is left unread.
When input already waits, the poll answers at once and bytes in flight may be missing
from the count; it is then still at least what waited, never 0. Readiness asks only
whether the count is 0, which is exact either way.

Both operations need the slave open, which ``TIOCGPTPEER`` on the master does (Linux
4.13+, ``O_NOCTTY`` so it never becomes anyone's controlling terminal). Readiness asks
for the unread count on every send, and opening and closing the slave is most of what
that costs, so :class:`TerminalInput` keeps the peer open while the program runs and
closes it at :meth:`TerminalInput.release`, when the program has exited: from then on
each operation opens the peer for a moment only, and the slave's open count, with it
the master's EOF once every program holding the terminal is gone, is the programs' own
again. Where the ioctl is missing both report "unknown".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import sys
import termios
from collections.abc import Callable
from typing import TypeVar

__all__ = ["TerminalInput"]

# _IO('T', 0x41): the same on every architecture Linux uses the generic ioctl layout for.
_TIOCGPTPEER = 0x5441
_OPEN_FLAGS = os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK
_LINUX = sys.platform.startswith("linux")
_HANGUP = select.POLLHUP | select.POLLERR | select.POLLNVAL
_T = TypeVar("_T")


class TerminalInput:
    """Unread input of one PTY, through a peer kept open until :meth:`release`.

    ``keep`` False opens the peer for each operation (where descriptors are scarce).
    A kept peer that reports a hang-up or an error is closed and the operation is made
    once more through a fresh one, which is then kept.
    """

    def __init__(self, master_fd: int, *, keep: bool) -> None:
        self._master_fd = master_fd
        self._keep = keep and _LINUX
        self._peer: int | None = None
        self._poller: select.poll | None = None

    def unread(self) -> int | None:
        """How many input bytes wait in the slave's queue, unread by any program.

        In canonical mode the count covers complete lines only (what ``FIONREAD`` reports
        there). 0 is exact; a count above 0 may leave out bytes still in flight (see the
        module's docstring). None when it cannot be known (no ``TIOCGPTPEER``, a hung-up
        terminal).
        """
        return self._through_peer(_count_unread)

    def flush(self) -> bool:
        """Discard input the program has not read yet (``tcflush(TCIFLUSH)`` on the slave).

        Returns False when it could not be done. Bytes still in the flip buffer are
        discarded with the queue.
        """
        return self._through_peer(_flush) is not None

    def _through_peer(self, operation: Callable[[int, select.poll | None], _T | None]) -> _T | None:
        """``operation`` on the kept peer (a fresh one once if it fails), or on a peer
        opened for the moment; None when it could not be done."""
        if self._keep:
            for _attempt in range(2):
                kept = self._kept_peer()
                if kept is None:
                    return None
                outcome = operation(kept, self._poller)
                if outcome is not None:
                    return outcome
                self._close_kept()
            return None
        peer = _open_peer(self._master_fd)
        if peer is None:
            return None
        try:
            return operation(peer, None)
        finally:
            _close(peer)

    def release(self) -> None:
        """Close the kept peer; later operations open one for a moment each. Idempotent."""
        self._keep = False
        self._close_kept()

    def _kept_peer(self) -> int | None:
        if self._peer is None:
            peer = _open_peer(self._master_fd)
            if peer is None:
                return None
            poller = select.poll()
            poller.register(peer, select.POLLIN)
            self._peer, self._poller = peer, poller
        return self._peer

    def _close_kept(self) -> None:
        peer, self._peer, self._poller = self._peer, None, None
        if peer is not None:
            _close(peer)


def _open_peer(master_fd: int) -> int | None:
    if not _LINUX:
        return None
    try:
        fd = fcntl.ioctl(master_fd, _TIOCGPTPEER, _OPEN_FLAGS)
    except OSError:
        return None
    return int(fd)


def _count_unread(peer: int, poller: select.poll | None) -> int | None:
    """The slave's queued input count, after a poll that flushes the flip buffer; None
    when the terminal is hung up or the count cannot be read."""
    try:
        if poller is None:
            poller = select.poll()
            poller.register(peer, select.POLLIN)
        for _fd, events in poller.poll(0):
            if events & _HANGUP:
                return None
        raw = fcntl.ioctl(peer, termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return None
    return int(struct.unpack("i", raw)[0])


def _flush(peer: int, _poller: select.poll | None) -> bool | None:
    """Discard the slave's queued input; None when it could not be done."""
    try:
        termios.tcflush(peer, termios.TCIFLUSH)
    except (OSError, termios.error):
        return None
    return True


def _close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
