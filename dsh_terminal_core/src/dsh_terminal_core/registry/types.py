"""Value types and protocols shared by the registry, backends and consumers."""

from __future__ import annotations

import asyncio
import datetime
import re
from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    NotRequired,
    Protocol,
    TypedDict,
    runtime_checkable,
)

import attrs

from ..kernel.cancel import Cancellation
from ..kernel.secret import Secret
from ..kernel.signals import ALLOWED_SIGNALS
from ..kernel.tooldecl import Items, derive_schema
from ..provider.listening import Listener
from .linematch import LineMatch

if TYPE_CHECKING:
    from ..kernel.agents import Agent

__all__ = [
    "ALLOWED_SIGNALS",
    "MIN_REQUEST_BYTES",
    "STATUS_SCHEMA",
    "BackendSession",
    "BackendSpawnContext",
    "Highlight",
    "HighlightValue",
    "HumanReport",
    "HumanReportValue",
    "LineTailSession",
    "ListeningSession",
    "MarkedBackend",
    "RawInputSession",
    "ReadRequest",
    "ReadResult",
    "RetainedLines",
    "ScreenRead",
    "ScreenValue",
    "ScreenView",
    "SearchMatch",
    "SearchRequest",
    "SearchResult",
    "SearchableSession",
    "SecretPromptSession",
    "SendObserver",
    "SendOperation",
    "SendRequest",
    "SendResult",
    "SessionStatus",
    "SessionStatusValue",
    "SignalResult",
    "Snapshot",
    "SpawnRequest",
    "SpawnResult",
    "TerminalBackend",
    "TerminalSize",
    "WaitReason",
    "WatchedSession",
    "WorldRouter",
    "status_text",
]


class WaitReason(StrEnum):
    """Why a send stopped waiting. Only ``STDIN_READ`` is evidence the terminal is ready."""

    STDIN_READ = "stdin_read"
    INFERRED_IDLE = "inferred_idle"
    TIMEOUT = "timeout"
    SESSION_EXIT = "session_exit"
    #: A complete output line matched the send's ``wait_for``; the program keeps running.
    MATCHED = "matched"


class SessionStatusValue(TypedDict):
    """The wire form of a :class:`SessionStatus`: ``exitCode`` and ``signal`` when exited."""

    kind: Literal["running", "exited"]
    exitCode: NotRequired[int | None]
    signal: NotRequired[str | None]


@attrs.frozen(kw_only=True)
class SessionStatus:
    """``running``, or ``exited`` with the exit code or the signal name that ended it."""

    kind: Literal["running", "exited"]
    exit_code: int | None = None
    signal: str | None = None

    @classmethod
    def running(cls) -> SessionStatus:
        return cls(kind="running")

    def to_wire(self) -> SessionStatusValue:
        wire: SessionStatusValue = {"kind": self.kind}
        if self.kind == "exited":
            wire["exitCode"] = self.exit_code
            wire["signal"] = self.signal
        return wire


def status_text(status: Mapping[str, object]) -> str:
    """How a session status reads in a tool's text, from its wire form (``to_wire()``).

    ``running``, ``exited (exit code N)`` or ``exited (killed by SIGNAME)``: every tool
    that shows a status says it the same way.
    """
    if status["kind"] == "running":
        return "running"
    if status.get("signal"):
        return f"exited (killed by {status['signal']})"
    return f"exited (exit code {status.get('exitCode')})"


# The JSON schema of ``SessionStatus.to_wire()``, for tools that return a status and do
# not declare their value with :func:`~dsh_terminal_core.kernel.tooldecl.tool` (a value
# TypedDict that holds a SessionStatusValue derives the same schema itself).
STATUS_SCHEMA: dict[str, Any] = derive_schema(SessionStatusValue, closed=False)


@attrs.frozen(kw_only=True)
class SpawnRequest:
    """What to open. ``screen`` asks for a screen session (a terminal emulator shows what a
    full-screen program draws); ``rows``/``cols`` override the backend's window size.

    ``opened_by`` names the surface that opens the session (``"terminal"`` for the
    ``terminal_*`` tools, ``"pty"`` for ``ctx.pty`` and its tools, ``"ssh"``...). Every
    surface lists the same sessions of an owner, so ``terminal_list`` shows it: a session
    an ssh consumer opened is driven with ``ssh_*``, not typed into directly.
    """

    type: str
    name: str | None = None
    cwd: str | None = None
    screen: bool = False
    rows: int | None = None
    cols: int | None = None
    opened_by: str | None = None
    #: The execution world to open in (SPEC §21); None is the configured default.
    world: str | None = None


@attrs.frozen(kw_only=True)
class SpawnResult:
    session_id: str
    name: str | None
    type: str
    pid: int
    status: SessionStatus
    motd: str
    #: The world it runs in; ``pid`` means something only there.
    world: str = "local"


# The smallest ``max_bytes`` a send or read may ask for: room for both ends of the output
# and the line that marks what was omitted between them.
MIN_REQUEST_BYTES = 1024


@attrs.frozen(kw_only=True)
class SendRequest:
    """One send. ``timeout_ms`` bounds this send alone (None: the backend's default).

    ``text=""`` with ``submit=False`` types nothing: the send waits for the running
    foreground to settle on the same ladder (how to wait for a long build).

    ``max_bytes`` bounds this send's viewport below the backend's own bound: a
    model-facing caller passes its budget so the backend keeps the head and the tail of
    long output within it (the first error of a build survives with the last line).

    ``keys`` (named keys and literal strings, encoded by the backend for the terminal's
    current modes) replaces ``text``; a ``keys`` send never adds Enter.

    ``wait_for`` (compiled with :func:`dsh_terminal_core.linematch.compile_line_pattern`)
    also settles the send, ``matched``, once a complete line of output written after the
    input matches it; every other way to settle still applies.
    """

    text: str
    submit: bool = True
    cancel: Cancellation | None = attrs.field(default=None, eq=False)
    timeout_ms: int | None = None
    max_bytes: int | None = None
    secret: Secret | None = attrs.field(default=None, eq=False, repr=False)
    """Typed raw (then Enter) instead of ``text``, only at a hidden-input prompt."""
    keys: tuple[str, ...] | None = None
    wait_for: re.Pattern[str] | None = attrs.field(default=None, eq=False)


class HighlightValue(TypedDict):
    """The wire form of a :class:`Highlight`."""

    row: int
    col: int
    text: str


class ScreenValue(TypedDict):
    """The wire form of a :class:`ScreenView`; ``cursor`` is ``[row, col]``."""

    text: str
    cursor: Annotated[list[int], Items(2, 2)]
    alternate: bool
    highlights: NotRequired[list[HighlightValue]]


@attrs.frozen(kw_only=True)
class Highlight:
    """A run of the screen shown marked (inverse video, or a background colour on a row or
    two): a selected menu item, a focused button. ``row``/``col`` from 0 are where its
    first non-blank character is; ``text`` is the run's text, blanks at both ends trimmed.
    """

    row: int
    col: int
    text: str

    def to_wire(self) -> HighlightValue:
        return {"row": self.row, "col": self.col, "text": self.text}


@attrs.frozen(kw_only=True)
class ScreenView:
    """The visible screen: trailing blanks of each line trimmed; ``cursor`` is
    ``(row, col)`` from 0; ``alternate`` is true while a full-screen program runs;
    ``highlights`` are the runs shown only by inverse video or colour (the wire form
    leaves the key out when there are none)."""

    text: str
    cursor: tuple[int, int]
    alternate: bool
    highlights: tuple[Highlight, ...] = ()

    def to_wire(self) -> ScreenValue:
        wire: ScreenValue = {
            "text": self.text,
            "cursor": list(self.cursor),
            "alternate": self.alternate,
        }
        if self.highlights:
            wire["highlights"] = [mark.to_wire() for mark in self.highlights]
        return wire


@attrs.frozen(kw_only=True)
class ScreenRead:
    """A screen session's screen at the moment it was read, with the window size."""

    screen: ScreenView
    rows: int
    cols: int


@attrs.frozen(kw_only=True)
class TerminalSize:
    rows: int
    cols: int


@attrs.frozen(kw_only=True)
class SendResult:
    """The outcome of one send. ``exit_code`` is set only when the prompt marker settled it."""

    viewport: str
    wait_reason: WaitReason
    session_status: SessionStatus
    truncated: bool
    exit_code: int | None = None
    input_hidden: bool = False
    #: In a screen session, the screen when the program drew one during the send.
    screen: ScreenView | None = None
    #: A line-mode session whose program is on the alternate screen as the send settled.
    alternate_screen: bool = False
    #: The line that settled the send ``matched``.
    match: LineMatch | None = None
    #: Sockets the session's processes began listening on after the input was written.
    listening: tuple[Listener, ...] = ()
    #: Settled ``inferred_idle`` on a program redrawing on a clock that never reads the
    #: terminal (``watch``, ``tail -f``): it keeps running and will keep printing.
    periodic: bool = False


@attrs.frozen(kw_only=True)
class ReadRequest:
    """``count`` lines from line number ``offset``; ``max_bytes`` as for sends.

    Lines are numbered from 1 on every surface — tools, this registry, searches, a
    person's line ranges, wait-for matches — so a number read anywhere is an ``offset``
    here (SPEC §27.6).
    """

    offset: int = 1
    count: int = 500
    max_bytes: int | None = None


@attrs.frozen(kw_only=True)
class ReadResult:
    """A page of lines ``line_begin..line_end``, numbered from 1, both included
    (``line_end == line_begin - 1``: none); ``total_lines`` is the number of the newest."""

    text: str
    total_lines: int
    line_begin: int
    line_end: int
    truncated: bool


@attrs.frozen(kw_only=True)
class SearchRequest:
    """Find the retained lines that match ``pattern`` (:meth:`TerminalSessionService.search`).

    ``pattern`` is a literal, or with ``regex`` an RE2 regular expression (no
    backreferences or lookaround; it never backtracks), matched against each line on its
    own as a terminal shows it: it never spans two lines, and ``^``/``$`` match at each
    line's start and end. At most 1,000 characters, no line break. ``context`` lines
    (0..5) come with each match from before and after it; at most ``max_matches``
    (1..200) matches are kept, the newest. ``max_bytes`` bounds the result as for reads
    (None: 256 KiB). A search still running after 0.9 s is stopped, ``INVALID_ARGUMENT``.
    """

    pattern: str
    regex: bool = False
    ignore_case: bool = False
    context: int = 0
    max_matches: int = 50
    max_bytes: int | None = None


@attrs.frozen(kw_only=True)
class SearchMatch:
    """One matching line, numbered as :attr:`ReadRequest.offset` takes it (from 1).

    ``line`` is the line as shown; one longer than 500 characters is shown as the 500
    around its match, with ``…`` where it was cut. ``before`` and ``after`` are the
    context lines, oldest first (fewer at either end of what is retained), each cut to
    its first 500 characters the same way.
    """

    line_number: int
    line: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class SearchResult:
    """The matches, oldest first (newest last), over lines ``line_begin..line_end``
    (numbered from 1, both included).

    ``truncated`` says older matches were left out: more than ``max_matches`` lines
    matched, or the kept ones filled ``max_bytes``.
    """

    matches: tuple[SearchMatch, ...]
    line_begin: int
    line_end: int
    truncated: bool


@attrs.frozen(kw_only=True)
class RetainedLines:
    """A snapshot of a session's retained lines, safe to read from any thread.

    ``segments`` are ``(first, text)`` pairs in line order: ``text`` holds whole lines,
    each followed by ``"\\n"``, the first at position ``first``; together they are the
    positions ``[line_begin, line_end)``. Positions count from 0 and stay between a
    backend and the search (:mod:`dsh_terminal_core.registry.search`), which reports
    lines numbered from 1 as every surface does; the line still being written is
    included as its last. ``overstruck`` says the lines may hold backspaces still to be
    applied (:func:`dsh_terminal_core.registry.overstrike.render`) to show them as a
    terminal does.
    """

    line_begin: int
    line_end: int
    segments: tuple[tuple[int, str], ...] = ()
    overstruck: bool = False


@attrs.frozen(kw_only=True)
class SignalResult:
    delivered: bool
    target_pgid: int


@attrs.frozen(kw_only=True)
class Snapshot:
    session_id: str
    name: str | None
    type: str
    pid: int
    status: SessionStatus
    cwd: str | None
    #: What the session's processes listen on now (backends that can tell).
    listening: tuple[Listener, ...] = ()
    #: The surface that opened it (:attr:`SpawnRequest.opened_by`); None when not said.
    opened_by: str | None = None
    #: The world it runs in (SPEC §21).
    world: str = "local"


@runtime_checkable
class SendOperation(Protocol):
    """A send in progress. ``await op.done`` gives the :class:`SendResult`."""

    @property
    def done(self) -> asyncio.Future[SendResult]: ...

    def result(self) -> Awaitable[SendResult]:
        """The result, for a caller that must not cancel the send by being cancelled.

        Cancelling the await leaves the send running (unlike awaiting :attr:`done`), and
        the caller resumes in the loop turn the send settles (``shield(done)`` takes one
        more).
        """
        ...

    def read_output(self) -> str:
        """Return the output collected since the previous call (consuming cursor)."""
        ...

    def cancel(self) -> Awaitable[None]:
        """Drop unwritten input and interrupt the foreground group; awaitable, not required."""
        ...


@runtime_checkable
class SettleNotifying(Protocol):
    """A send that calls back in the step it ends, not a loop turn later.

    A done callback on :attr:`SendOperation.done` runs a turn after the result is set;
    a world agent writes the settlement from this instead, so the harness hears of it
    that much sooner (SPEC §21, §29: a world send's p50 against a local one).
    """

    def when_ended(self, callback: Callable[[asyncio.Future[SendResult]], None]) -> None:
        """Call ``callback(done)`` as the send ends (at once when it has already)."""
        ...


@attrs.frozen(kw_only=True)
class BackendSpawnContext:
    """What a backend gets to create one session."""

    owner: Agent = attrs.field(eq=False)
    session_id: str
    name: str | None
    cwd: str | None
    cancel: Cancellation = attrs.field(eq=False)
    screen: bool = False
    rows: int | None = None
    cols: int | None = None


@runtime_checkable
class BackendSession(Protocol):
    """One live terminal owned by a backend. The registry adds ids and authorization."""

    @property
    def pid(self) -> int: ...

    @property
    def status(self) -> SessionStatus: ...

    @property
    def motd(self) -> str: ...

    def cwd(self) -> str | None: ...

    def start_send(self, request: SendRequest) -> SendOperation:
        """Reserve the session synchronously and start writing; ``SEND_ACTIVE`` if busy."""
        ...

    def read(self, request: ReadRequest) -> ReadResult: ...

    async def signal(self, sig: str) -> SignalResult: ...

    def resize(self, rows: int, cols: int) -> TerminalSize:
        """Set the window size; the foreground program gets ``SIGWINCH``."""
        ...

    def read_screen(self) -> ScreenRead:
        """Return the visible screen; ``INVALID_ARGUMENT`` in a session without one."""
        ...

    async def close(self, reason: str) -> None:
        """Tear the session down; raise if processes survive (a later call retries)."""
        ...


@runtime_checkable
class LineTailSession(Protocol):
    """A backend session that can hand out its complete lines from a line cursor.

    An optional capability beyond :class:`BackendSession`, reached through
    :meth:`TerminalSessionService.complete_lines_since` (``UNSUPPORTED`` for sessions
    without it): ``read`` pages lines but includes the line still being written, so an
    incremental tail built on it would either resend that line or cut it in half. The
    bash backend's sessions implement it. Lines are numbered absolutely from the start of
    the session, so a cursor stays valid when the backend trims old output.
    """

    def complete_lines_since(self, cursor: int) -> tuple[list[str], int]:
        """Return the retained complete lines numbered ``cursor`` and later, and the next cursor.

        Lines already trimmed are skipped; the returned lines are contiguous and end just
        before the next cursor, so ``next - cursor - len(lines)`` lines were lost.
        """
        ...


@runtime_checkable
class SearchableSession(Protocol):
    """A backend session that can hand out a snapshot of its retained lines (SPEC §23).

    The capability behind :meth:`TerminalSessionService.search` (``UNSUPPORTED`` for
    sessions without it). The registry takes the snapshot on the event loop and searches
    it, in a worker thread unless it is small, so :meth:`retained_lines` must be cheap
    (references to the text the backend keeps, not copies of it) and must number lines
    exactly as :meth:`BackendSession.read` does. The bash backend's sessions and world
    sessions implement it.
    """

    def retained_lines(self) -> RetainedLines:
        """The lines retained now, the one still being written included."""
        ...


@runtime_checkable
class ListeningSession(Protocol):
    """A backend session that can tell where its processes listen (SPEC §19.3).

    An optional capability; :meth:`TerminalSessionService.list` carries it in each
    :class:`Snapshot` (empty for sessions without it).
    """

    def listening(self) -> tuple[Listener, ...]:
        """The sockets its foreground and background jobs listen on now."""
        ...


@runtime_checkable
class SecretPromptSession(Protocol):
    """A backend session that can prove it is at a hidden-input prompt right now.

    The capability behind ``terminal_send {secret}``: a backend that implements it
    checks again right before it writes a :attr:`SendRequest.secret` and refuses with
    ``NOT_AT_SECRET_PROMPT`` (writing nothing) when the proof is gone.
    """

    def hidden_prompt(self) -> str | None:
        """The prompt line when a program waits, echo off, for a line; None otherwise."""
        ...


@runtime_checkable
class SendObserver(Protocol):
    """Told of every send the registry starts, whichever backend runs it (SPEC §23).

    The recorder is one: it must know a secret is about to be typed before the backend
    writes it (a backend may write inside ``start_send``), and when the send settles.
    Both calls run synchronously on the event loop and must not raise.
    """

    def before_send(self, session_id: str, request: SendRequest) -> None:
        """``request`` was accepted for ``session_id``; its backend starts it next."""
        ...

    def after_send(
        self, session_id: str, request: SendRequest, operation: SendOperation | None
    ) -> None:
        """The backend started ``request`` (``operation``), or refused it (None)."""
        ...


@runtime_checkable
class RawInputSession(Protocol):
    """A backend session a person can type into directly (SPEC §22).

    An optional capability: a person who took control of the session through a watch
    link types keys, and they reach the terminal as they are, with no readiness, no
    echo handling and no settling. Sessions without it cannot be taken over
    (``UNSUPPORTED``).
    """

    async def type_raw(self, text: str) -> None:
        """Write ``text`` (UTF-8) to the terminal as typed; ``SESSION_EXITED`` once it ended."""
        ...


@runtime_checkable
class WatchedSession(Protocol):
    """A backend session that calls back on new output, so a page can follow it unpolled."""

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after each piece of output and once at the end; returns a remover."""
        ...


class HumanReportValue(TypedDict):
    """The wire form of a :class:`HumanReport`: lines numbered from 1, both ends included."""

    tookControlAt: str
    handedBackAt: str
    lineBegin: int
    lineEnd: int


@attrs.frozen(kw_only=True)
class HumanReport:
    """A person's time in control of a session: when, and the lines printed meanwhile.

    ``line_begin`` is the line (numbered from 1, as everywhere) the terminal was on when
    they took control, ``line_end`` the last line started when they handed back, as
    :class:`ReadResult` counts; times are seconds since the epoch.
    """

    took_control_at: float
    handed_back_at: float
    line_begin: int
    line_end: int

    def to_wire(self) -> HumanReportValue:
        return {
            "tookControlAt": _iso(self.took_control_at),
            "handedBackAt": _iso(self.handed_back_at),
            "lineBegin": self.line_begin,
            "lineEnd": max(self.line_end, self.line_begin - 1),
        }


def _iso(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@runtime_checkable
class MarkedBackend(Protocol):
    """A backend whose shells carry an environment marker naming their owner.

    Everything a marked shell starts inherits the marker, so
    :func:`dsh_terminal_core.provider.census.processes_with_env` finds an owner's
    processes even after they left the terminal's process tree.
    """

    def process_marker(self, owner_id: str) -> Mapping[str, str]:
        """The ``NAME=value`` pairs every process of ``owner_id``'s shells carries."""
        ...


@runtime_checkable
class WorldRouter(Protocol):
    """Where sessions may run besides this host: the ``worlds`` plugin's service."""

    @property
    def default(self) -> str:
        """The world a request that names none opens in (``local`` unless configured)."""
        ...

    def names(self) -> list[str]:
        """Every world, ``local`` first."""
        ...

    def backend(self, world: str, type: str) -> TerminalBackend:
        """The backend for ``type`` there; ``INVALID_ARGUMENT`` for an unknown world."""
        ...


@runtime_checkable
class TerminalBackend(Protocol):
    """A kind of terminal (``type``), e.g. the bash backend's ``shell``."""

    @property
    def type(self) -> str: ...

    @property
    def exports_env(self) -> bool:
        """True when its sessions run a POSIX shell, so ``export NAME=value`` lines work."""
        ...

    async def spawn(self, context: BackendSpawnContext) -> BackendSession: ...
