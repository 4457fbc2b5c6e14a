"""What the Linux stdin-wait probe reads and decides with, apart from the look itself.

The small records a look hands back (:class:`Polled`, :class:`Threads`, :class:`WaitSet`)
and the parsers of the ``/proc`` fields and ioctl answers it reads: pure functions of
bytes, kept here so :mod:`.inspector_linux` holds only the judging.
"""

from __future__ import annotations

import enum
import fcntl
import struct
from typing import Final

import attrs

__all__ = [
    "GENERAL",
    "Handover",
    "Polled",
    "Threads",
    "WaitSet",
    "asleep_unsignalled",
    "parse_syscall",
    "pty_number",
    "set_bits",
]


class Handover(enum.Enum):
    """The specialised look cannot decide: take the general one."""

    GENERAL = enum.auto()


GENERAL: Final = Handover.GENERAL


@attrs.frozen
class Polled:
    """A process seen in a polling wait: the wait's timeout, the run stamps bracketing the
    look (one per thread, in ``tids`` order), and the wake count and busy time they hold."""

    timeout_ns: int
    stamp: bytes
    tids: tuple[str, ...]
    wakes: int | None
    busy_ns: int | None


@attrs.frozen
class Threads:
    """What :meth:`_Look.all_threads` found: every thread asleep, nothing pending.

    ``reading``: some thread is in a proof wait on the terminal; else ``polled_ns`` is
    the shortest timeout of the threads polling it. ``wakes`` and ``busy_ns`` are summed
    over every thread; ``stamps`` are the run stamps that bracketed the look.
    """

    reading: bool
    polled_ns: int | None
    wakes: int | None
    busy_ns: int | None
    stamps: tuple[bytes, ...]


@attrs.frozen
class WaitSet:
    """The descriptors of one blocked call: those it reads, and every one that can wake it."""

    reads: list[int]
    wakes: list[int]


def asleep_unsignalled(status: bytes) -> bool:
    """A task's ``status``: asleep (``S``), no signal queued for it or for its process."""
    state = status.find(b"\nState:")
    if state < 0 or status[state + 7 : state + 16].strip()[:1] != b"S":
        return False
    for name in (b"\nSigPnd:", b"\nShdPnd:"):
        start = status.find(name)
        if start < 0:
            return False
        end = status.find(b"\n", start + 1)
        try:
            if int(status[start + len(name) : end if end >= 0 else None], 16):
                return False
        except ValueError:
            return False
    return True


def set_bits(bitmap: bytes, nfds: int) -> list[int]:
    """The descriptors below ``nfds`` whose bits are set in a ``select`` set."""
    fds: list[int] = []
    # Both supported architectures are little-endian: bit n is byte n//8, bit n%8.
    for index, byte in enumerate(bitmap):
        while byte:
            low = byte & -byte
            fd = index * 8 + low.bit_length() - 1
            byte ^= low
            if fd < nfds:
                fds.append(fd)
    return fds


def pty_number(master_fd: int, request: int) -> int | None:
    try:
        raw = fcntl.ioctl(master_fd, request, b"\0\0\0\0")
    except OSError:
        return None
    return int(struct.unpack("I", raw)[0])


def parse_syscall(line: str) -> tuple[int, list[int], int] | None:
    """Parse ``nr arg0..arg5 sp pc`` into the number, the arguments and the stack
    pointer; None when running, not in a syscall, or malformed."""
    fields = line.split()
    if len(fields) < 9 or fields[0] == "running":
        return None
    try:
        number = int(fields[0])
        args = [int(field, 16) for field in fields[1:7]]
        stack = int(fields[7], 16)
    except ValueError:
        return None
    if number < 0:
        return None
    return number, args, stack
