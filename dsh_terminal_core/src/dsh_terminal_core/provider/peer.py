"""The input side of a PTY, seen from the master: what the program has not read yet.

Bytes written to the master reach the slave's input queue through the kernel's flip
buffer, which a work queue empties. Counting the slave's queue right after a write can
therefore say 0 while the bytes are still in flight. Polling the slave first settles
that: the line discipline's poll flushes the pending work before it answers, so the
count that follows includes every byte the master accepted.

Both operations open the slave for a moment through ``TIOCGPTPEER`` on the master
(Linux 4.13+, ``O_NOCTTY`` so it never becomes anyone's controlling terminal) and close
it at once, so the slave's open count, and with it the master's EOF once the program
is gone, stays the program's alone. Where the ioctl is missing both report "unknown".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import struct
import sys
import termios

__all__ = ["flush_input", "unread_input"]

# _IO('T', 0x41): the same on every architecture Linux uses the generic ioctl layout for.
_TIOCGPTPEER = 0x5441
_OPEN_FLAGS = os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK
_LINUX = sys.platform.startswith("linux")


def _open_peer(master_fd: int) -> int | None:
    if not _LINUX:
        return None
    try:
        fd = fcntl.ioctl(master_fd, _TIOCGPTPEER, _OPEN_FLAGS)
    except OSError:
        return None
    return int(fd)


def unread_input(master_fd: int) -> int | None:
    """Return how many input bytes wait in the slave's queue, unread by any program.

    In canonical mode the count covers complete lines only (what ``FIONREAD`` reports
    there). None when it cannot be known (no ``TIOCGPTPEER``, a hung-up terminal).
    """
    peer = _open_peer(master_fd)
    if peer is None:
        return None
    try:
        poller = select.poll()
        poller.register(peer, select.POLLIN)
        poller.poll(0)  # flushes bytes still in the flip buffer into the queue
        raw = fcntl.ioctl(peer, termios.FIONREAD, b"\0\0\0\0")
        return int(struct.unpack("i", raw)[0])
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(peer)


def flush_input(master_fd: int) -> bool:
    """Discard input the program has not read yet (``tcflush(TCIFLUSH)`` on the slave).

    Returns False when it could not be done. Bytes still in the flip buffer are
    discarded with the queue.
    """
    peer = _open_peer(master_fd)
    if peer is None:
        return False
    try:
        termios.tcflush(peer, termios.TCIFLUSH)
        return True
    except (OSError, termios.error):
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(peer)
