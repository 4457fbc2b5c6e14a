"""The ``ctx.pty`` facade: protocol-free byte-stream sessions for plugin authors.

It knows nothing about the programs it drives: line framing, REPL prompts, gdb/MI
records and ssh banners belong to consumers built on top. Over the session registry it
adds four things: running a command in a fresh session, an incremental tail cursor per
session, waiting on that cursor for a line that matches a pattern, and closing everything
it opened when an owner or the facade goes away.

Authorization is the registry's: every call passes the caller's owner through, so
another owner's id fails with ``FOREIGN_SESSION`` before the facade touches anything.
Closing is idempotent on purpose, because the registry closes an owner's sessions on its
own when the owner is disposed and this facade does too; whichever runs second finds
nothing left and returns quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from dsh_terminal_core import (
    Agent,
    Cancellation,
    DisposeError,
    InvalidArgument,
    TerminalError,
    finish_shielded,
    owner_not_live,
)
from dsh_terminal_core.registry import SendRequest, SessionStatus, SpawnRequest
from dsh_terminal_core.registry.linematch import LineMatcher, compile_line_pattern

from .config import PtySessionConfig
from .quoting import export_line
from .types import LineWaitSession, PtyOpened, PtyRegistry, PtySent, PtyTail, PtyWaited, WaitEnd

__all__ = ["OPENED_BY", "PtySessionService"]

#: What ``terminal_list`` says opened a session this facade opened, unless told otherwise.
OPENED_BY = "pty"

# Refusals that mean "there is nothing left to close" during cleanup.
_GONE = frozenset({"NO_SESSION", "OWNER_NOT_LIVE", "SERVICE_DISPOSING"})


@attrs.define(eq=False)
class _Tracked:
    """What the facade knows about one session id: its owner and its tail cursor.

    ``opened`` marks sessions this facade started; only those are closed by the owner's
    disposal and by :meth:`PtySessionService.dispose`. A session opened elsewhere (e.g.
    by ``terminal_open``) may still be tailed, but closing it is its opener's business.
    """

    owner: Agent
    opened: bool
    cursor: int = 0


class PtySessionService:
    """``open``/``send``/``tail``/``close`` over ``ctx.terminals``, one tail cursor per session.

    The ``pty_*`` tools call exactly these methods, so a plugin using the facade and a
    model using the tools see the same sessions, the same cursor and the same reads.
    """

    def __init__(self, terminals: PtyRegistry, config: PtySessionConfig) -> None:
        self._terminals = terminals
        self._config = config
        self._sessions: dict[str, _Tracked] = {}
        # Owners whose dispose effect is installed, with its remover. Weak, so the facade
        # never keeps a finished agent alive; the effect itself holds only a weak ref.
        self._owner_hooks: weakref.WeakKeyDictionary[Agent, Callable[[], None]] = (
            weakref.WeakKeyDictionary()
        )
        self._disposing = False

    @property
    def config(self) -> PtySessionConfig:
        return self._config

    def opened_sessions(self, owner: Agent) -> list[str]:
        """Ids of the sessions this facade opened for ``owner`` and has not seen closed."""
        return [sid for sid, t in self._sessions.items() if t.opened and t.owner is owner]

    # -- open -----------------------------------------------------------------------------

    async def open(
        self,
        owner: Agent,
        request: Mapping[str, Any],
        cancel: Cancellation | None = None,
        *,
        opened_by: str = OPENED_BY,
    ) -> PtyOpened:
        """Start a ``backend_type`` session, export ``env``, and run ``command`` in it.

        ``request`` holds ``command`` (required), ``cwd``, ``env`` (NAME -> value) and
        ``world`` (SPEC §21: a configured execution world; the default one when left out).
        ``opened_by`` is what ``terminal_list`` says opened it: ``"pty"``, or a consumer's
        own name (``"ssh"``), so a model listing its sessions knows which tools drive one.
        Everything is validated before a session exists, so a bad request leaves nothing
        behind and sends nothing. Once spawned, any failure — a refused send, the caller's
        cancellation (token or task), the facade being disposed — closes the session again
        before the error propagates; the caller's own reason is what it gets back.
        ``initial_output`` is what ``command`` printed while its write settled.
        """
        if not isinstance(request, Mapping):
            raise InvalidArgument("the open request must be a mapping with a 'command'")
        command = request.get("command")
        if not isinstance(command, str) or not command.strip():
            raise InvalidArgument("command must be a non-empty string")
        cwd = request.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise InvalidArgument("cwd must be a non-empty string")
        world = request.get("world")
        if world is not None and (not isinstance(world, str) or not world):
            raise InvalidArgument("world must be the name of a configured world")
        env = request.get("env")
        if env is not None and not isinstance(env, Mapping):
            raise InvalidArgument("env must be an object mapping NAME to a string value")
        exports = export_line(env) if env else None
        backend = self._config.backend_type
        if exports is not None and not self._terminals.backend_exports_env(backend):
            raise InvalidArgument(
                f"env is exported by a shell; backend {backend!r} does not declare "
                "exports_env, so leave env out"
            )
        if self._disposing:
            raise _facade_disposing()
        if not owner.live:
            raise owner_not_live(owner)
        self._hook(owner)

        spawned = await self._terminals.spawn(
            owner,
            SpawnRequest(
                type=self._config.backend_type, cwd=cwd, opened_by=opened_by, world=world
            ),
            cancel,
        )
        session_id = spawned.session_id
        self._sessions[session_id] = _Tracked(owner=owner, opened=True)
        try:
            self._raise_if_refused(owner, cancel)
            if exports is not None:
                await self._send(owner, session_id, exports, True, cancel)
                self._raise_if_refused(owner, cancel)
            result = await self._send(owner, session_id, command, True, cancel)
            self._raise_if_refused(owner, cancel)
        except BaseException:
            await self._roll_back(owner, session_id)
            raise
        return PtyOpened(
            session_id=session_id,
            pid=spawned.pid,
            status=result.status,
            initial_output=result.delta,
        )

    def _raise_if_refused(self, owner: Agent, cancel: Cancellation | None) -> None:
        """Stop an open whose caller gave up, or whose owner or facade is going away.

        Checked between steps because a session closed under a send does not fail the
        send (it settles as exited), and an open must not report success for it.
        """
        if cancel is not None:
            cancel.raise_if_cancelled()
        if self._disposing:
            raise _facade_disposing()
        if not owner.live:
            raise owner_not_live(owner)

    async def _roll_back(self, owner: Agent, session_id: str) -> None:
        """Close a half-opened session to the end, even if the caller is cancelled meanwhile.

        A rollback abandoned half-way would leak the processes it was stopping. Its own
        failure is not raised (the caller needs the original error); the session then
        stays tracked, so the owner's disposal or :meth:`dispose` tries again.
        """
        with contextlib.suppress(Exception):
            await finish_shielded(self.close(owner, session_id))

    # -- send -----------------------------------------------------------------------------

    async def send(
        self,
        owner: Agent,
        session_id: str,
        request: Mapping[str, Any],
        cancel: Cancellation | None = None,
    ) -> PtySent:
        """Write ``data`` (then Enter when ``submit``, the default); return what settled.

        ``submit=False`` writes the exact characters and nothing else, and an empty
        ``data`` with ``submit=False`` writes nothing at all: it only waits, by the
        backend's readiness rules, until the program is waiting for input again or has
        been silent long enough — a way to collect output that arrives on its own.
        ``delta`` is the output read from the write until that point. Cancelling
        ``cancel`` (or the awaiting task) drops unwritten input and interrupts the
        foreground program, as the backend defines.
        """
        if not isinstance(request, Mapping):
            raise InvalidArgument("the send request must be a mapping with 'data'")
        data = request.get("data")
        if not isinstance(data, str):
            raise InvalidArgument("data must be a string")
        submit = request.get("submit", True)
        if not isinstance(submit, bool):
            raise InvalidArgument("submit must be true or false")
        return await self._send(owner, session_id, data, submit, cancel)

    async def _send(
        self, owner: Agent, session_id: str, data: str, submit: bool, cancel: Cancellation | None
    ) -> PtySent:
        op = self._terminals.start_send(
            owner, session_id, SendRequest(text=data, submit=submit, cancel=cancel)
        )
        try:
            result = await op.result()
        except asyncio.CancelledError:
            # The reservation is held until the interrupt settles; let it, then leave.
            with contextlib.suppress(Exception):
                await finish_shielded(op.cancel())
            raise
        return PtySent(delta=result.viewport, status=result.session_status)

    def status(self, owner: Agent, session_id: str) -> SessionStatus:
        """The session's status now (``NO_SESSION``/``FOREIGN_SESSION`` as every call).

        A send to a session whose status is ``exited`` types into nothing: its result
        only says so. The ``pty_send`` tool asks first and refuses such a send.
        """
        return self._terminals.get_session(owner, session_id).status

    # -- tail -----------------------------------------------------------------------------

    def tail(self, owner: Agent, session_id: str, lines: int | None = None) -> PtyTail:
        """Return the complete lines printed since the previous tail, the newest ``lines``.

        The cursor starts at the session's first line and only moves forward, so no
        line is ever returned twice. ``truncated`` is true when more than ``lines`` new
        lines were waiting, or when the backend had already trimmed new lines from its
        scrollback before this tail. A line whose newline has not arrived yet (a prompt)
        is returned once it is complete.

        Raises ``UNSUPPORTED`` when the session's backend does not offer complete lines
        by cursor (the registry's ``complete_lines_since``; see
        :class:`~dsh_terminal_core.terminals.LineTailSession`).
        """
        limit = self._config.tail_lines if lines is None else lines
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument("lines must be a positive integer")
        tracked = self._sessions.get(session_id)
        cursor = tracked.cursor if tracked is not None and tracked.owner is owner else 0
        new_lines, next_cursor = self._terminals.complete_lines_since(owner, session_id, cursor)
        tracked = self._tracked(owner, session_id)
        trimmed = next_cursor - tracked.cursor - len(new_lines)
        tracked.cursor = max(tracked.cursor, next_cursor)
        truncated = trimmed > 0 or len(new_lines) > limit
        if len(new_lines) > limit:
            new_lines = new_lines[-limit:]
        text = "".join(line + "\n" for line in new_lines)
        return PtyTail(text=text, lines=len(new_lines), truncated=truncated)

    def _tracked(self, owner: Agent, session_id: str) -> _Tracked:
        tracked = self._sessions.get(session_id)
        if tracked is None or tracked.owner is not owner:
            tracked = _Tracked(owner=owner, opened=False)
            self._sessions[session_id] = tracked
            self._hook(owner)
        return tracked

    # -- wait -----------------------------------------------------------------------------

    async def wait(
        self,
        owner: Agent,
        session_id: str,
        pattern: re.Pattern[str] | str,
        timeout_ms: int,
        *,
        lines: int | None = None,
        partial: bool = False,
    ) -> PtyWaited:
        """Wait until a complete line after the tail cursor matches ``pattern``; consume it.

        Returns as soon as a line printed since the previous ``tail`` or ``wait`` matches
        (``pattern.search``), with every complete line from the cursor through the
        matching one; later lines stay for the next read. Without a match it returns
        every complete line when ``timeout_ms`` passes (``reason="timeout"``) or when the
        session has ended (``"exit"``). With ``partial`` the line still being written is
        tried too — how a consumer notices a prompt that waits on the same line for an
        answer (``matched_open``); that line is never consumed. ``lines`` keeps only the
        newest lines of the result (``truncated`` then, as when the backend trimmed some
        before they were read); ``None`` keeps them all.

        The wait is driven by the session's output and exit events, never by polling.
        It shares the cursor with :meth:`tail`, so one reader per session at a time.
        Raises ``INVALID_ARGUMENT`` for a bad pattern, timeout or limit,
        ``FOREIGN_SESSION``/``NO_SESSION`` for an id the owner cannot use, and
        ``UNSUPPORTED`` when the backend cannot say when output arrives.
        """
        # The same pattern rules and line matching as terminal_send's waitFor.
        matcher = LineMatcher(compile_line_pattern(pattern, "pattern"))
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 0:
            raise InvalidArgument("timeout_ms must be a non-negative integer")
        if lines is not None and (
            isinstance(lines, bool) or not isinstance(lines, int) or lines < 1
        ):
            raise InvalidArgument("lines must be a positive integer or None")
        session = self._terminals.get_session(owner, session_id)
        if not isinstance(session, LineWaitSession):
            raise TerminalError(
                f"session {session_id} cannot be waited on: its backend session "
                f"({type(session).__name__}) does not provide watch() and complete lines",
                "UNSUPPORTED",
            )
        tracked = self._tracked(owner, session_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        news = asyncio.Event()
        remove = session.watch(news.set)
        scanned = tracked.cursor
        try:
            while True:
                news.clear()
                new_lines, next_cursor = session.complete_lines_since(scanned)
                first = next_cursor - len(new_lines)
                for index, line in enumerate(new_lines):
                    if matcher.matches(line):
                        return _take(tracked, session, first + index + 1, "match", line, lines)
                scanned = next_cursor
                if partial:
                    open_line = session.open_line()
                    if open_line and matcher.matches(open_line):
                        return _take(tracked, session, scanned, "match", open_line, lines, True)
                if session.status.kind == "exited":
                    return _take(tracked, session, scanned, "exit", None, lines)
                if loop.time() >= deadline:
                    return _take(tracked, session, scanned, "timeout", None, lines)
                try:
                    async with asyncio.timeout_at(deadline):
                        await news.wait()
                except TimeoutError:
                    pass
        finally:
            remove()

    # -- close and dispose ----------------------------------------------------------------

    async def close(self, owner: Agent, session_id: str) -> bool:
        """Close the session and end its processes; ``False`` when it was already gone.

        ``False`` also when a close of the same session was already in flight (this call
        waited for it). A failed close raises and leaves the session closable again;
        another owner's id raises ``FOREIGN_SESSION`` and changes nothing.
        """
        try:
            closed = await self._terminals.kill(owner, session_id, "closed by pty close")
        except TerminalError as exc:
            if exc.code != "NO_SESSION":
                raise
            closed = False
        tracked = self._sessions.get(session_id)
        if tracked is not None and tracked.owner is owner:
            del self._sessions[session_id]
        return bool(closed)

    async def dispose(self) -> None:
        """Close every session this facade opened, of every owner; refuse new opens.

        Raises :class:`DisposeError` naming each close that failed. A second call only
        retries what is left.
        """
        self._disposing = True
        for remove in list(self._owner_hooks.values()):
            remove()
        self._owner_hooks.clear()
        opened = [(sid, t.owner) for sid, t in self._sessions.items() if t.opened]
        self._sessions = {sid: t for sid, t in self._sessions.items() if t.opened}
        errors = await self._close_all(opened)
        if errors:
            raise DisposeError("closing the sessions of the pty facade failed", errors)

    async def _owner_disposed(self, ref: weakref.ref[Agent]) -> None:
        """Owner dispose effect: close what this facade opened for it, forget its cursors."""
        owner = ref()
        if owner is None:
            return
        self._owner_hooks.pop(owner, None)
        mine = [(sid, t) for sid, t in self._sessions.items() if t.owner is owner]
        opened = [(sid, owner) for sid, t in mine if t.opened]
        for sid, t in mine:
            if not t.opened:
                del self._sessions[sid]
        errors = await self._close_all(opened)
        if errors:
            raise DisposeError(f"closing the pty sessions of {owner!r} failed", errors)

    async def _close_all(self, sessions: list[tuple[str, Agent]]) -> list[BaseException]:
        results = await asyncio.gather(
            *(self.close(owner, sid) for sid, owner in sessions), return_exceptions=True
        )
        errors: list[BaseException] = []
        for (sid, owner), outcome in zip(sessions, results, strict=True):
            if not isinstance(outcome, BaseException):
                continue
            if isinstance(outcome, TerminalError) and outcome.code in _GONE:
                tracked = self._sessions.get(sid)
                if tracked is not None and tracked.owner is owner:
                    del self._sessions[sid]
                continue
            errors.append(outcome)
        return errors

    def _hook(self, owner: Agent) -> None:
        """Install, once per owner, the dispose effect closing what the facade opened for it."""
        if owner in self._owner_hooks or not owner.live:
            return
        ref = weakref.ref(owner)
        self._owner_hooks[owner] = owner.on_dispose(lambda: self._owner_disposed(ref))


def _take(
    tracked: _Tracked,
    session: LineWaitSession,
    end: int,
    reason: WaitEnd,
    matched: str | None,
    limit: int | None,
    matched_open: bool = False,
) -> PtyWaited:
    """Consume the complete lines from the cursor up to line number ``end`` (exclusive)."""
    available, next_cursor = session.complete_lines_since(tracked.cursor)
    begin = next_cursor - len(available)
    taken = available[: max(0, end - begin)]
    truncated = begin > tracked.cursor
    tracked.cursor = max(tracked.cursor, begin + len(taken))
    if limit is not None and len(taken) > limit:
        taken = taken[-limit:]
        truncated = True
    return PtyWaited(
        text="".join(line + "\n" for line in taken),
        lines=len(taken),
        truncated=truncated,
        reason=reason,
        matched=matched,
        matched_open=matched_open,
        open_line=session.open_line(),
        status=session.status,
    )


def _facade_disposing() -> TerminalError:
    return TerminalError(
        "the pty facade is shutting down; no new sessions can be opened", "SERVICE_DISPOSING"
    )
