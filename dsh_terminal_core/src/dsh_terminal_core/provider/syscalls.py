"""Linux syscall numbers and ioctl codes the terminal inspector needs, per architecture.

Only the architectures listed here are probed. Everywhere else the tables are empty and
the exact stdin-wait probe answers False: a wrong syscall number would turn an unrelated
wait into a false "reading the terminal", which is worse than no answer.
"""

from __future__ import annotations

import enum
import platform

import attrs

__all__ = ["SyscallTable", "Wait", "current_table", "table_for"]


class Wait(enum.Enum):
    """How a blocked syscall names the descriptors it waits on."""

    READ = "read"  # arg0 is the fd
    SELECT = "select"  # arg0 nfds, arg1 pointer to the read fd_set
    POLL = "poll"  # arg0 pointer to struct pollfd[], arg1 nfds
    EPOLL = "epoll"  # arg0 the epoll fd


@attrs.frozen(kw_only=True)
class SyscallTable:
    """Syscall numbers that can mean "waiting for input", for one architecture.

    ``tiocgptn`` and ``tiocgptpeer`` are the ioctl codes that name or open a PTY master's
    slave; both use the generic ioctl encoding on the architectures listed here.
    """

    machine: str
    waits: dict[int, Wait]
    tiocgptn: int = 0x80045430
    tiocgptpeer: int = 0x5441


# x86_64: arch/x86/entry/syscalls/syscall_64.tbl
_X86_64 = SyscallTable(
    machine="x86_64",
    waits={
        0: Wait.READ,  # read
        19: Wait.READ,  # readv
        23: Wait.SELECT,  # select
        270: Wait.SELECT,  # pselect6
        7: Wait.POLL,  # poll
        271: Wait.POLL,  # ppoll
        232: Wait.EPOLL,  # epoll_wait
        281: Wait.EPOLL,  # epoll_pwait
        441: Wait.EPOLL,  # epoll_pwait2
    },
)

# aarch64: include/uapi/asm-generic/unistd.h (no select, poll or epoll_wait here)
_AARCH64 = SyscallTable(
    machine="aarch64",
    waits={
        63: Wait.READ,  # read
        65: Wait.READ,  # readv
        72: Wait.SELECT,  # pselect6
        73: Wait.POLL,  # ppoll
        22: Wait.EPOLL,  # epoll_pwait
        441: Wait.EPOLL,  # epoll_pwait2
    },
)

_TABLES = {"x86_64": _X86_64, "amd64": _X86_64, "aarch64": _AARCH64, "arm64": _AARCH64}


def table_for(machine: str) -> SyscallTable | None:
    """Return the table for a ``platform.machine()`` value, or None if it is not covered."""
    return _TABLES.get(machine.lower())


def current_table() -> SyscallTable | None:
    """Return the table for the running machine, or None if it is not covered."""
    return table_for(platform.machine())
