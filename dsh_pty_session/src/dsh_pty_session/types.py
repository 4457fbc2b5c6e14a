"""Values the ``ctx.pty`` facade returns, and the registry surface and capability it needs.

:class:`LineTailSession` is declared by the core registry
(``dsh_terminal_core.terminals``) and re-exported here for consumers.

Each value has ``to_wire()`` giving the camelCase JSON the ``pty_*`` tools return, so
the tools and the facade cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, runtime_checkable

import attrs

from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.registry import (
    BackendSession,
    LineTailSession,
    SendOperation,
    SendRequest,
    SessionStatus,
    SessionStatusValue,
    SpawnRequest,
    SpawnResult,
)

if TYPE_CHECKING:
    from dsh_terminal_core.kernel.agents import Agent

__all__ = [
    "LineTailSession",
    "LineWaitSession",
    "PtyOpened",
    "PtyOpenedValue",
    "PtyRegistry",
    "PtySent",
    "PtySentValue",
    "PtyTail",
    "PtyTailValue",
    "PtyWaited",
    "WaitEnd",
]


@runtime_checkable
class PtyRegistry(Protocol):
    """The part of ``ctx.terminals`` the facade uses; a test may inject any object with it.

    Every method authorizes ``owner`` by identity and raises ``TerminalError`` with
    ``NO_SESSION`` or ``FOREIGN_SESSION`` for an id the owner cannot use.
    """

    async def spawn(
        self, owner: Agent, request: SpawnRequest, cancel: Cancellation | None = None
    ) -> SpawnResult: ...

    def start_send(self, owner: Agent, session_id: str, request: SendRequest) -> SendOperation: ...

    def get_session(self, owner: Agent, session_id: str) -> BackendSession: ...

    def complete_lines_since(
        self, owner: Agent, session_id: str, cursor: int
    ) -> tuple[list[str], int]:
        """Complete lines from ``cursor`` on; ``UNSUPPORTED`` for a backend without them."""
        ...

    def backend_exports_env(self, kind: str) -> bool:
        """True when the backend of type ``kind`` runs ``export`` lines (a shell)."""
        ...

    async def kill(self, owner: Agent, session_id: str, reason: str) -> bool: ...


@runtime_checkable
class LineWaitSession(LineTailSession, Protocol):
    """A line-tail session that also says when it has news, so a reader can wait on it.

    The bash backend's sessions implement it; :meth:`PtySessionService.wait` needs it.
    """

    @property
    def status(self) -> SessionStatus: ...

    def open_line(self) -> str:
        """The line still being written (no newline yet); ``""`` when there is none."""
        ...

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after each piece of output and once the session has ended.

        Returns a remover. The callback runs on the event loop and must only wake a waiter.
        """
        ...


class PtyOpenedValue(TypedDict):
    """A :class:`PtyOpened` on the wire: the ``pty_open`` tool's value."""

    sessionId: str
    pid: int
    status: SessionStatusValue
    initialOutput: str


class PtySentValue(TypedDict):
    """A :class:`PtySent` on the wire: the ``pty_send`` tool's value."""

    delta: str
    status: SessionStatusValue


class PtyTailValue(TypedDict):
    """A :class:`PtyTail` on the wire: the ``pty_tail`` tool's value."""

    text: str
    lines: int
    truncated: bool


@attrs.frozen(kw_only=True)
class PtyOpened:
    """A started session: its id, the pid of its terminal process, and its first output."""

    session_id: str
    pid: int
    status: SessionStatus
    initial_output: str

    def to_wire(self) -> PtyOpenedValue:
        return {
            "sessionId": self.session_id,
            "pid": self.pid,
            "status": self.status.to_wire(),
            "initialOutput": self.initial_output,
        }


@attrs.frozen(kw_only=True)
class PtySent:
    """The output read while a write settled, and the session's status after it."""

    delta: str
    status: SessionStatus

    def to_wire(self) -> PtySentValue:
        return {"delta": self.delta, "status": self.status.to_wire()}


@attrs.frozen(kw_only=True)
class PtyTail:
    """New complete lines; ``truncated`` when older new lines were skipped or trimmed."""

    text: str
    lines: int
    truncated: bool

    def to_wire(self) -> PtyTailValue:
        return {"text": self.text, "lines": self.lines, "truncated": self.truncated}


WaitEnd = Literal["match", "timeout", "exit"]


@attrs.frozen(kw_only=True)
class PtyWaited:
    """What a :meth:`~dsh_pty_session.PtySessionService.wait` consumed, and why it ended.

    ``text`` holds the complete lines taken from the tail cursor, each ending in a
    newline: through the matching line on ``match``, everything complete on ``timeout``
    and ``exit``. ``matched`` is the line the pattern matched (``None`` unless
    ``reason`` is ``match``); ``matched_open`` says it was the line still being written,
    which is never consumed. ``open_line`` is that unfinished line when the wait ended.
    """

    text: str
    lines: int
    truncated: bool
    reason: WaitEnd
    matched: str | None
    matched_open: bool
    open_line: str
    status: SessionStatus

    def to_wire(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "lines": self.lines,
            "truncated": self.truncated,
            "reason": self.reason,
            "matched": self.matched,
            "matchedOpen": self.matched_open,
            "openLine": self.open_line,
            "status": self.status.to_wire(),
        }
