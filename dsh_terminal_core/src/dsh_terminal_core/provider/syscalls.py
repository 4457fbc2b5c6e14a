"""Linux syscall numbers and ioctl codes the terminal inspector needs, per architecture.

Only the architectures listed here are probed. Everywhere else the tables are empty and
the exact stdin-wait probe answers False: a wrong syscall number would turn an unrelated
wait into a false "reading the terminal", which is worse than no answer.
"""

from __future__ import annotations

import enum
import platform

import attrs

__all__ = ["Limit", "SyscallTable", "Wait", "WaitCall", "current_table", "table_for"]


class Wait(enum.Enum):
    """How a blocked syscall names the descriptors it waits on."""

    READ = "read"  # arg0 is the fd
    SELECT = "select"  # arg0 nfds, arg1 pointer to the read fd_set
    POLL = "poll"  # arg0 pointer to struct pollfd[], arg1 nfds
    EPOLL = "epoll"  # arg0 the epoll fd


class Limit(enum.Enum):
    """How a blocked syscall states when it gives up waiting by itself."""

    NONE = "none"  # no timeout argument: waits until woken
    MILLIS = "millis"  # an int of milliseconds in a register; negative means forever
    TIMEVAL = "timeval"  # a pointer to struct timeval; NULL means forever
    TIMESPEC = "timespec"  # a pointer to struct timespec; NULL means forever


@attrs.frozen
class WaitCall:
    """One waiting syscall: how it names descriptors, and where its timeout argument is."""

    kind: Wait
    limit: Limit = Limit.NONE
    limit_arg: int = 0  # argument index of the timeout, unused for Limit.NONE


@attrs.frozen(kw_only=True)
class SyscallTable:
    """Syscall numbers that can mean "waiting for input", for one architecture.

    ``tiocgptn`` and ``tiocgptpeer`` are the ioctl codes that name or open a PTY master's
    slave; both use the generic ioctl encoding on the architectures listed here.
    ``futex`` is the number of ``futex``, where a thread of a threaded program waits for
    another of its threads (a lock, a condition, a queue); -1 where unknown.
    ``signal_waits`` are the calls that sleep until a signal comes (glibc's POSIX timer
    thread sits in ``rt_sigtimedwait``), each with the index of its timeout argument (a
    ``struct timespec`` pointer), or -1 for a call that has none.
    ``sleeps`` are the calls that sleep for a time (``nanosleep``, ``clock_nanosleep``),
    each with the index of its ``struct timespec`` argument; ``clock_nanosleep`` (index 2)
    takes its clock and flags in the first two.
    """

    machine: str
    waits: dict[int, WaitCall]
    futex: int = -1
    signal_waits: dict[int, int] = attrs.field(factory=dict)
    sleeps: dict[int, int] = attrs.field(factory=dict)
    tiocgptn: int = 0x80045430
    tiocgptpeer: int = 0x5441


# x86_64: arch/x86/entry/syscalls/syscall_64.tbl
_X86_64 = SyscallTable(
    machine="x86_64",
    waits={
        0: WaitCall(Wait.READ),  # read
        19: WaitCall(Wait.READ),  # readv
        23: WaitCall(Wait.SELECT, Limit.TIMEVAL, 4),  # select
        270: WaitCall(Wait.SELECT, Limit.TIMESPEC, 4),  # pselect6
        7: WaitCall(Wait.POLL, Limit.MILLIS, 2),  # poll
        271: WaitCall(Wait.POLL, Limit.TIMESPEC, 2),  # ppoll
        232: WaitCall(Wait.EPOLL, Limit.MILLIS, 3),  # epoll_wait
        281: WaitCall(Wait.EPOLL, Limit.MILLIS, 3),  # epoll_pwait
        441: WaitCall(Wait.EPOLL, Limit.TIMESPEC, 3),  # epoll_pwait2
    },
    futex=202,
    signal_waits={128: 2, 34: -1, 130: -1},  # rt_sigtimedwait, pause, rt_sigsuspend
    sleeps={35: 0, 230: 2},  # nanosleep, clock_nanosleep
)

# aarch64: include/uapi/asm-generic/unistd.h (no select, poll or epoll_wait here)
_AARCH64 = SyscallTable(
    machine="aarch64",
    waits={
        63: WaitCall(Wait.READ),  # read
        65: WaitCall(Wait.READ),  # readv
        72: WaitCall(Wait.SELECT, Limit.TIMESPEC, 4),  # pselect6
        73: WaitCall(Wait.POLL, Limit.TIMESPEC, 2),  # ppoll
        22: WaitCall(Wait.EPOLL, Limit.MILLIS, 3),  # epoll_pwait
        441: WaitCall(Wait.EPOLL, Limit.TIMESPEC, 3),  # epoll_pwait2
    },
    futex=98,
    signal_waits={137: 2, 133: -1},  # rt_sigtimedwait, rt_sigsuspend
    sleeps={101: 0, 115: 2},  # nanosleep, clock_nanosleep
)

_TABLES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def table_for(machine: str) -> SyscallTable | None:
    """Return the table for a ``platform.machine()`` value, or None if it is not covered."""
    return _TABLES.get(machine.lower())


def current_table() -> SyscallTable | None:
    """Return the table for the running machine, or None if it is not covered."""
    return table_for(platform.machine())
