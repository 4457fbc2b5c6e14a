"""Types of the terminal-process provider (``ctx.subprocess``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import attrs

from .cgroups import CgroupGroup
from .inspector import PollingWait, QuietHelpers, ReaderWait

__all__ = [
    "ExitStatus",
    "Foreground",
    "OutputHandler",
    "ProcessWrapper",
    "TerminalProcess",
    "TerminalProvider",
    "TerminalSpawnSpec",
    "WrappingProvider",
]

OutputHandler = Callable[[bytes], None]


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attribute.name} must be a positive integer, got {value!r}")


def _to_tuple(argv: Sequence[str]) -> tuple[str, ...]:
    return tuple(argv)


@attrs.frozen(kw_only=True)
class TerminalSpawnSpec:
    """How to start a process on a fresh PTY.

    ``cgroup``: the session's cgroup (made by the owner's limits, SPEC §29), which the
    child joins before it execs; the provider takes it over — teardown empties it by force
    (``setsid`` daemons and double forks included) and removes it, and so does a spawn
    that fails.

    ``quiet_helpers``: waits the program's helper threads are known to end quietly from
    (:class:`.inspector.QuietHelpers`), declared by a backend for its shell; they hold
    for the process that leads the shell's group and any process of the same executable.
    """

    argv: tuple[str, ...] = attrs.field(converter=_to_tuple)
    cwd: str | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    rows: int = attrs.field(default=40, validator=_positive)
    cols: int = attrs.field(default=160, validator=_positive)
    grace_ms: int = attrs.field(default=3000, validator=_positive)
    cgroup: CgroupGroup | None = attrs.field(default=None, eq=False)
    quiet_helpers: QuietHelpers | None = None


@attrs.frozen(kw_only=True)
class ExitStatus:
    """How the PTY child ended: an exit code, or the name of the signal that killed it."""

    exit_code: int | None
    signal: str | None


class Foreground(NamedTuple):
    """Facts about the terminal's foreground process group at one instant.

    ``input_waiting`` is exact on Linux (a member is blocked reading the terminal) and
    always False where no probe exists. ``echo`` and ``canonical`` are the terminal's
    ECHO and ICANON flags. ``wake_count`` is the summed wake counts (counts that move
    whenever a thread runs) of the threads found waiting: when it moves between two looks at
    the same waiting group, that group woke up (read something) and went back to waiting
    in between.

    ``polling`` is set only when no member is provably waiting and the group is a
    single-threaded leader alone, polling the terminal: blocked reading it in a wait that
    would be proof but for its own short timeout (``top -d 1``, a curses program with a key
    timeout). Alone it proves nothing; a caller that sees it come back, look after look,
    with little CPU used between, may conclude the program waits for keys.

    A named tuple, not a frozen class: the readiness ladder builds one on nearly every
    send, where a frozen class costs several times as much to build.
    """

    process_group_id: int
    input_waiting: bool
    echo: bool
    canonical: bool = True
    wake_count: int = 0
    # The reading leader's run stamp (single-threaded leaders only): while
    # ``ran_since(process_group_id, leader_stamp)`` is False, the leader is in this very wait.
    leader_stamp: bytes | None = None
    polling: PollingWait | None = None

    @property
    def input_hidden(self) -> bool:
        """Line-mode input with echo off: a password prompt (getpass, sudo, ssh).

        Readline-driven programs (bash, python's REPL) also turn ECHO off, but they leave
        canonical mode too and echo by themselves, so they do not count as hidden.
        """
        return self.input_waiting and not self.echo and self.canonical


@runtime_checkable
class TerminalProcess(Protocol):
    """A live process on a PTY; see ``LocalTerminalProcess`` for the contract."""

    @property
    def pid(self) -> int: ...

    @property
    def done(self) -> asyncio.Future[ExitStatus]: ...

    def set_output_handler(self, handler: OutputHandler | None) -> None: ...

    async def write(self, data: str | bytes) -> None: ...

    def write_now(self, data: bytes) -> int:
        """Write what the terminal takes at once; the count (0 while another write runs)."""
        ...

    @property
    def exact_input_probe(self) -> bool:
        """True where ``input_waiting`` and :meth:`is_reading_terminal` are exact (Linux on
        x86_64/aarch64); False where they always answer False, so a caller must fall
        back to another readiness signal."""
        ...

    def inspect_foreground(self) -> Foreground | None: ...

    def terminal_modes(self) -> tuple[bool, bool] | None:
        """The terminal's (ECHO, ICANON) flags; None when unreadable."""
        ...

    def foreground_pgid(self) -> int | None: ...

    def pending_output(self) -> int:
        """Bytes readable on the master that the output handler has not received yet."""
        ...

    def drain_output(self) -> None:
        """Deliver whatever output the master holds now, synchronously."""
        ...

    def unread_input(self) -> int | None:
        """Input bytes no program has read yet; None when unknown."""
        ...

    def flush_input(self) -> bool:
        """Discard input no program has read yet; False when it could not be done."""
        ...

    def wake_count(self, pid: int) -> int | None:
        """``pid``'s wake count (moves whenever it runs); None when unknown."""
        ...

    def quietly_asleep(self, pid: int) -> bool | None:
        """``pid`` sleeps with no signal pending; None when unknown."""
        ...

    def run_stamp(self, pid: int) -> bytes | None:
        """Changes whenever single-threaded ``pid`` runs; None when unknown or threaded."""
        ...

    def ran_since(self, pid: int, stamp: bytes) -> bool:
        """``pid`` ran since ``run_stamp`` gave ``stamp``; True unless proven otherwise."""
        ...

    def executable_id(self, pid: int) -> tuple[int, int] | None:
        """The (device, inode) of ``pid``'s executable; None when unknown."""
        ...

    def has_children(self, pid: int) -> bool | None:
        """Whether the shell ``pid`` has a child process now; None when unknown."""
        ...

    def sole_member(self, pgid: int) -> bool:
        """Group ``pgid`` provably holds its leader alone; False when unknown."""
        ...

    def is_reading_terminal(self, pid: int) -> bool: ...

    def reader_wait(self, pid: int) -> ReaderWait | None:
        """``pid``'s wait if it is blocked reading the terminal; None otherwise or unknown."""
        ...

    def set_shell_process_group(self, pgid: int) -> None: ...

    def signal_foreground(self, sig: str, expected_pgid: int | None = None) -> int: ...

    async def terminate(self) -> None: ...

    def resize(self, rows: int, cols: int) -> None: ...


@runtime_checkable
class TerminalProvider(Protocol):
    """What ``ctx.subprocess`` offers: start a process on a new PTY."""

    async def spawn_terminal(self, spec: TerminalSpawnSpec) -> TerminalProcess: ...


ProcessWrapper = Callable[[TerminalProcess, TerminalSpawnSpec], TerminalProcess]
"""Takes a process just spawned from a spec and returns the process its caller gets."""


@runtime_checkable
class WrappingProvider(Protocol):
    """A provider that hands every process it spawns through wrappers first.

    The seam a layer above uses to see every terminal's bytes without touching a
    backend: the recorder (SPEC §23) wraps each process so its output, input and
    resizes are recorded, whichever backend drives it.
    """

    def add_process_wrapper(self, wrap: ProcessWrapper) -> Callable[[], None]:
        """Pass every process spawned from now on through ``wrap``; returns its remover."""
        ...
