"""The platform-neutral face of the exact stdin-wait probe.

A probe answers one question: is this process (or some process of this group) blocked
reading the session's terminal right now? Linux answers it exactly from ``/proc``;
every other platform answers False, which the bash backend's readiness ladder treats as
"no evidence" and falls back to its prompt-stability and silence tiers.
"""

from __future__ import annotations

import sys
from typing import NamedTuple, Protocol

import attrs

from .procfiles import KeptFiles

__all__ = [
    "NullStdinProbe",
    "PollingWait",
    "QuietHelpers",
    "ReaderWait",
    "ShellHelpers",
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
class QuietHelpers:
    """Waits in which one program's helper threads are known to end without a sound.

    The threaded-readiness rule (:mod:`.inspector_linux`) takes no thread that wakes by
    itself within a second as asleep: in general nobody knows what it does then. A
    program whose source says what its helper threads do when such a wait runs out (an
    idle worker of a thread pool leaves the pool; an idle descriptor monitor ends its
    lap and exits) may declare those waits here, for every thread of it but its main
    one; its process then counts as waiting whole once its main thread is in a proof
    wait on the terminal and every helper is in one of them.

    ``futex_ns``: a ``futex`` sleep whose timeout runs out within this long (a condition
    variable's timed wait for work; a wake-up from a thread that queued work makes the
    helper run, which the look's run stamps see). ``own_poll_ns``: a ``poll``/``select``
    with a timeout of at most this long, on the process's own descriptors only (its event
    sources and self-pipes), none of them readable. 0 declares none of that kind.
    The declaration holds for a process running the shell's executable only.
    """

    futex_ns: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    own_poll_ns: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    #: The named pipes it opens for reading and writing are shared by all its instances
    #: (see :meth:`.channels.ChannelJudge.only_own`): a nested instance holding the one
    #: its parent instance holds too is still waiting for the user. Holds for every
    #: thread.
    shared_fifos: bool = False


@attrs.frozen(kw_only=True)
class ShellHelpers:
    """:class:`QuietHelpers` of the processes that run one executable (``(device, inode)``
    of ``/proc/<pid>/exe``): the session's shell and any instance of it started inside."""

    executable: tuple[int, int]
    waits: QuietHelpers


class ReaderWait(NamedTuple):
    """A process seen blocked reading the terminal, and what identifies that wait.

    ``wakes`` is its wake count (a threaded process's summed over every thread), read so
    that it describes this very wait (None when unreadable): it moves once the process
    wakes. ``stamp`` is the thread's run stamp (its scheduler statistics), unchanged
    while it stays in the wait, for a single-threaded process only (None otherwise): as
    long as a later read of ``/proc/<pid>/schedstat`` returns the same bytes, the process
    has not run, so it is still in this wait.
    """

    wakes: int | None
    stamp: bytes | None
    # A named tuple, not a frozen class: the prompt proof builds one on every send.


@attrs.frozen(kw_only=True)
class PollingWait:
    """A process polling the terminal: blocked reading it in a wait that ends by itself soon.

    Everything that makes a wait proof holds — the wait reads the terminal, every other
    descriptor in it is the process's own — except that its timeout runs out within a
    second, so the wait alone says nothing: the process may be busy between its polls.
    Only a process that is its group alone and has one thread is described, and only
    when none of its descriptors is a channel to anyone else (a socket or pipe whose
    other end another process holds, another terminal, a device), so that between two
    polls it cannot be waiting for someone else. Whether it keeps coming back to the
    wait while doing little between is for the caller to judge from two or more looks:

    ``timeout_ns`` is the wait's timeout as the process asked for it (the wait has ended
    by the time that much has passed since the look); ``wakes`` is its thread's wake
    count (it moves once the thread runs); ``busy_ns`` is how long the process has been
    busy so far: the time its thread ran or waited for a CPU, exactly (its scheduler
    statistics), plus the CPU time of the children it has reaped, in clock ticks.
    ``started`` (clock ticks after boot) tells a process from a later one that took over
    its pid. ``writes`` counts the ``write``-family calls it has made: 0 means it has not
    drawn anything yet.
    """

    pid: int
    started: int
    timeout_ns: int
    wakes: int | None
    busy_ns: int
    writes: int


class StdinProbe(Protocol):
    """Answers whether processes are blocked reading a given terminal."""

    def terminal_of(self, master_fd: int) -> TerminalIdentity | None:
        """Identify the slave of ``master_fd``; None where it cannot be determined."""
        ...

    def process_reading(self, pid: int, terminal: TerminalIdentity) -> bool:
        """Return True only if some thread of ``pid`` is blocked reading ``terminal``."""
        ...

    def reader_wait(
        self,
        pid: int,
        terminal: TerminalIdentity,
        kept: KeptFiles | None = None,
        helpers: ShellHelpers | None = None,
    ) -> ReaderWait | None:
        """Describe ``pid``'s wait if some thread of it is blocked reading ``terminal``.

        ``kept``: ``/proc`` files held open across looks, used when they are ``pid``'s
        (Linux only). ``helpers``: the helper-thread waits that count as quiet in a
        process running that executable.
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

    def group_wait(
        self, pgid: int, terminal: TerminalIdentity, helpers: ShellHelpers | None = None
    ) -> ReaderWait | PollingWait | None:
        """What :meth:`group_reader` finds, or else the :class:`PollingWait` of a group that
        is its leader alone, polling the terminal; None when neither is known.

        One look answers both: the polling answer costs more only when the leader is in a
        wait that ends by itself soon. ``helpers`` as for :meth:`reader_wait`.
        """
        ...


class NullStdinProbe:
    """The probe for platforms without one: never claims a process is reading."""

    def terminal_of(self, master_fd: int) -> TerminalIdentity | None:
        return None

    def process_reading(self, pid: int, terminal: TerminalIdentity) -> bool:
        return False

    def reader_wait(
        self,
        pid: int,
        terminal: TerminalIdentity,
        kept: KeptFiles | None = None,
        helpers: ShellHelpers | None = None,
    ) -> ReaderWait | None:
        return None

    def group_reader(self, pgid: int, terminal: TerminalIdentity) -> ReaderWait | None:
        return None

    def group_wait(
        self, pgid: int, terminal: TerminalIdentity, helpers: ShellHelpers | None = None
    ) -> ReaderWait | PollingWait | None:
        return None


def default_stdin_probe() -> StdinProbe:
    """Return the exact probe on Linux and the always-False probe elsewhere."""
    if sys.platform.startswith("linux"):
        from .inspector_linux import LinuxStdinProbe

        return LinuxStdinProbe()
    from .inspector_macos import MacStdinProbe

    return MacStdinProbe()
