"""The platform-neutral face of the exact stdin-wait probe.

A probe answers one question: is this process (or some process of this group) blocked
reading the session's terminal right now? Linux answers it exactly from ``/proc``;
every other platform answers False, which the bash backend's readiness ladder treats as
"no evidence" and falls back to its prompt-stability and silence tiers.
"""

from __future__ import annotations

import sys
from typing import Protocol

import attrs

from .procfiles import KeptFiles

__all__ = [
    "NullStdinProbe",
    "ReaderWait",
    "StdinProbe",
    "TerminalIdentity",
    "default_stdin_probe",
]


@attrs.frozen(kw_only=True)
class TerminalIdentity:
    """The PTY slave as a file: ``(device, inode)`` is exact, ``path`` is for messages.

    A descriptor whose target has this device and inode is the session's terminal. One
    opened through ``/dev/tty`` points at the ``/dev/tty`` node instead and reaches the
    slave through the opener's controlling terminal, which ``rdev`` identifies.
    """

    device: int
    inode: int
    rdev: int
    path: str


@attrs.frozen(kw_only=True)
class ReaderWait:
    """A process seen blocked reading the terminal, and what identifies that wait.

    ``wakes`` is its main thread's wake count, read so that it describes this very wait
    (None when unreadable): it moves once the process wakes. ``stamp`` is the thread's
    run stamp (its scheduler statistics), unchanged while it stays in the wait, for a
    single-threaded process only (None otherwise): as long as a later read of
    ``/proc/<pid>/schedstat`` returns the same bytes, the process has not run, so it is
    still in this wait.
    """

    wakes: int | None
    stamp: bytes | None


class StdinProbe(Protocol):
    """Answers whether processes are blocked reading a given terminal."""

    def terminal_of(self, master_fd: int) -> TerminalIdentity | None:
        """Identify the slave of ``master_fd``; None where it cannot be determined."""
        ...

    def process_reading(self, pid: int, terminal: TerminalIdentity) -> bool:
        """Return True only if some thread of ``pid`` is blocked reading ``terminal``."""
        ...

    def reader_wait(
        self, pid: int, terminal: TerminalIdentity, kept: KeptFiles | None = None
    ) -> ReaderWait | None:
        """Describe ``pid``'s wait if some thread of it is blocked reading ``terminal``.

        ``kept``: ``/proc`` files held open across looks, used when they are ``pid``'s
        (Linux only).
        """
        ...

    def group_reader(self, pgid: int, terminal: TerminalIdentity) -> ReaderWait | None:
        """The wait of a member of group ``pgid`` reading ``terminal``; None if none is known.

        ``wakes`` sums the wake counts of the waiting threads of the first member found
        waiting (the leader is looked at first): if it moves between two looks at the same
        waiting group, the group woke up and went back to waiting in between. ``stamp`` is
        the leader's run stamp when the leader is single-threaded and is the one reading.
        """
        ...


class NullStdinProbe:
    """The probe for platforms without one: never claims a process is reading."""

    def terminal_of(self, master_fd: int) -> TerminalIdentity | None:
        return None

    def process_reading(self, pid: int, terminal: TerminalIdentity) -> bool:
        return False

    def reader_wait(
        self, pid: int, terminal: TerminalIdentity, kept: KeptFiles | None = None
    ) -> ReaderWait | None:
        return None

    def group_reader(self, pgid: int, terminal: TerminalIdentity) -> ReaderWait | None:
        return None


def default_stdin_probe() -> StdinProbe:
    """Return the exact probe on Linux and the always-False probe elsewhere."""
    if sys.platform.startswith("linux"):
        from .inspector_linux import LinuxStdinProbe

        return LinuxStdinProbe()
    from .inspector_macos import MacStdinProbe

    return MacStdinProbe()
