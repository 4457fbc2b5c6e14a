"""The ``ctx.pty`` facade: protocol-free byte-stream sessions for plugin authors.

It knows nothing about the programs it drives: line framing, REPL prompts, gdb/MI
records and ssh banners belong to consumers built on top. It adds three things to the
session registry: running a command in a fresh session, an incremental tail cursor per
session, and closing everything it opened when its owner or the facade goes away.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import attrs

from dsh_terminal_core.agents import Agent
from dsh_terminal_core.cancel import Cancellation
from dsh_terminal_core.errors import InvalidArgument, TerminalError
from dsh_terminal_core.terminals import SendRequest, SessionStatus, SpawnRequest

from .config import PtySessionConfig
from .quoting import export_line

__all__ = ["PtyOpened", "PtySent", "PtySessionService", "PtyTail"]


@attrs.frozen(kw_only=True)
class PtyOpened:
    session_id: str
    pid: int
    status: SessionStatus
    initial_output: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "pid": self.pid,
            "status": self.status.to_wire(),
            "initialOutput": self.initial_output,
        }


@attrs.frozen(kw_only=True)
class PtySent:
    delta: str
    status: SessionStatus

    def to_wire(self) -> dict[str, Any]:
        return {"delta": self.delta, "status": self.status.to_wire()}


@attrs.frozen(kw_only=True)
class PtyTail:
    text: str
    lines: int
    truncated: bool

    def to_wire(self) -> dict[str, Any]:
        return {"text": self.text, "lines": self.lines, "truncated": self.truncated}


@attrs.define
class _Opened:
    owner: Agent
    cursor: int = 0


class PtySessionService:
    """``open``/``send``/``tail``/``close`` over ``ctx.terminals``; one cursor per session."""

    def __init__(self, terminals: Any, config: PtySessionConfig) -> None:
        self._terminals = terminals
        self._config = config
        self._opened: dict[str, _Opened] = {}
        self._owners_hooked: set[int] = set()

    @property
    def config(self) -> PtySessionConfig:
        return self._config

    async def open(
        self,
        owner: Agent,
        request: Mapping[str, Any],
        cancel: Cancellation | None = None,
    ) -> PtyOpened:
        """Start a ``backend_type`` session, export ``env``, run ``command`` in it."""
        command = request.get("command")
        if not isinstance(command, str) or not command.strip():
            raise InvalidArgument("command must be a non-empty string")
        env = request.get("env") or {}
        if not isinstance(env, Mapping):
            raise InvalidArgument("env must be an object of NAME: value strings")
        exports = export_line(env) if env else None
        if exports is not None and self._config.backend_type != "shell":
            raise InvalidArgument(
                f"env needs a shell backend; backend {self._config.backend_type!r} cannot export it"
            )
        spawned = await self._terminals.spawn(
            owner,
            SpawnRequest(type=self._config.backend_type, cwd=request.get("cwd")),
            cancel,
        )
        session_id = spawned.session_id
        self._track(owner, session_id)
        try:
            if exports is not None:
                await self._send(owner, session_id, exports, True, cancel)
            result = await self._send(owner, session_id, command, True, cancel)
        except BaseException:
            await self._forget_and_kill(owner, session_id)
            raise
        return PtyOpened(
            session_id=session_id,
            pid=spawned.pid,
            status=result.status,
            initial_output=result.delta,
        )

    async def send(self, owner: Agent, session_id: str, request: Mapping[str, Any]) -> PtySent:
        """Write ``data`` (plus Enter when ``submit``); return the output read while it settles."""
        data = request.get("data")
        if not isinstance(data, str):
            raise InvalidArgument("data must be a string")
        submit = request.get("submit", True)
        if not isinstance(submit, bool):
            raise InvalidArgument("submit must be true or false")
        return await self._send(owner, session_id, data, submit, None)

    async def _send(
        self, owner: Agent, session_id: str, data: str, submit: bool, cancel: Cancellation | None
    ) -> PtySent:
        op = self._terminals.start_send(
            owner, session_id, SendRequest(text=data, submit=submit, cancel=cancel)
        )
        result = await asyncio.shield(op.done)
        return PtySent(delta=result.viewport, status=result.session_status)

    def tail(self, owner: Agent, session_id: str, lines: int | None = None) -> PtyTail:
        """Complete lines since the previous tail (never resent); newest ``lines`` at most."""
        limit = self._config.tail_lines if lines is None else lines
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument("lines must be a positive integer")
        session = self._terminals.get_session(owner, session_id)
        opened = self._opened.get(session_id)
        cursor = opened.cursor if opened is not None else 0
        new_lines, cursor = session.complete_lines_since(cursor)
        if opened is not None:
            opened.cursor = cursor
        else:
            self._opened[session_id] = _Opened(owner=owner, cursor=cursor)
        truncated = len(new_lines) > limit
        if truncated:
            new_lines = new_lines[-limit:]
        text = "".join(line + "\n" for line in new_lines)
        return PtyTail(text=text, lines=len(new_lines), truncated=truncated)

    async def close(self, owner: Agent, session_id: str) -> bool:
        """Close the session; ``False`` when it is already gone (idempotent)."""
        try:
            closed = await self._terminals.kill(owner, session_id, "closed by pty close")
        except TerminalError as exc:
            if exc.code != "NO_SESSION":
                raise
            closed = False
        self._opened.pop(session_id, None)
        return bool(closed)

    async def dispose(self) -> None:
        """Close every session this facade opened, of every owner."""
        await self._close_all(list(self._opened.items()))

    async def _close_owner(self, owner: Agent) -> None:
        await self._close_all([(sid, o) for sid, o in self._opened.items() if o.owner is owner])
        self._owners_hooked.discard(id(owner))

    async def _close_all(self, sessions: list[tuple[str, _Opened]]) -> None:
        results = await asyncio.gather(
            *(self.close(opened.owner, sid) for sid, opened in sessions), return_exceptions=True
        )
        failures = [r for r in results if isinstance(r, BaseException)]
        real = [f for f in failures if not (isinstance(f, TerminalError) and f.code in _GONE)]
        if real:
            raise real[0]

    def _track(self, owner: Agent, session_id: str) -> None:
        self._opened[session_id] = _Opened(owner=owner)
        if id(owner) not in self._owners_hooked:
            self._owners_hooked.add(id(owner))
            owner.on_dispose(lambda: self._close_owner(owner))

    async def _forget_and_kill(self, owner: Agent, session_id: str) -> None:
        try:
            await asyncio.shield(self.close(owner, session_id))
        except Exception:  # noqa: BLE001 - the original failure is what the caller needs
            pass


# A session that is already gone, or whose owner is already being torn down, needs no close.
_GONE = frozenset({"NO_SESSION", "OWNER_NOT_LIVE", "SERVICE_DISPOSING"})
