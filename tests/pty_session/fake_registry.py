"""A stand-in for ``ctx.terminals``: the four calls the pty facade makes, over a real backend.

Injected by container override under the real ``pty_*`` tools, it proves the facade uses
only the registry surface it declares (:class:`dsh_pty_session.PtyRegistry`) and keeps
working with a registry that is not ours, while the sessions behind it are real
interactive shells. It records every call so a test can see what reached it. It does not
attach owner dispose effects, so closing on owner disposal is the facade's own doing.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from typing import Any

from dsh_terminal_bash import BashBackend, BashConfig
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import (
    BackendSession,
    BackendSpawnContext,
    LineTailSession,
    SendOperation,
    SendRequest,
    SpawnRequest,
    SpawnResult,
)


class FakeRegistry:
    """The registry calls the facade makes, over one backend, owner checked by identity."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.calls: list[tuple[str, str]] = []
        self.sessions: dict[str, tuple[Agent, BackendSession]] = {}
        self.closed: list[str] = []
        self._ids = itertools.count(1)

    async def spawn(
        self, owner: Agent, request: SpawnRequest, cancel: Cancellation | None = None
    ) -> SpawnResult:
        session_id = f"fake-{next(self._ids)}"
        self.calls.append(("spawn", session_id))
        context = BackendSpawnContext(
            owner=owner,
            session_id=session_id,
            name=request.name,
            cwd=request.cwd,
            cancel=cancel or Cancellation(),
        )
        session = await self.backend.spawn(context)
        self.sessions[session_id] = (owner, session)
        return SpawnResult(
            session_id=session_id,
            name=request.name,
            type=request.type,
            pid=session.pid,
            status=session.status,
            motd=session.motd,
        )

    def _authorize(self, owner: Agent, session_id: str) -> BackendSession:
        found = self.sessions.get(session_id)
        if found is None:
            raise TerminalError(f"no session {session_id!r}", "NO_SESSION")
        if found[0] is not owner:
            raise TerminalError(f"{session_id!r} belongs to another owner", "FOREIGN_SESSION")
        return found[1]

    def start_send(self, owner: Agent, session_id: str, request: SendRequest) -> SendOperation:
        self.calls.append(("start_send", session_id))
        return self._authorize(owner, session_id).start_send(request)

    def get_session(self, owner: Agent, session_id: str) -> BackendSession:
        self.calls.append(("get_session", session_id))
        return self._authorize(owner, session_id)

    def complete_lines_since(
        self, owner: Agent, session_id: str, cursor: int
    ) -> tuple[list[str], int]:
        session = self.get_session(owner, session_id)
        if not isinstance(session, LineTailSession):
            raise TerminalError(
                f"{session_id} ({type(session).__name__}) has no complete_lines_since(cursor)",
                "UNSUPPORTED",
            )
        return session.complete_lines_since(cursor)

    def backend_exports_env(self, kind: str) -> bool:
        return bool(kind == self.backend.type and self.backend.exports_env)

    async def kill(self, owner: Agent, session_id: str, reason: str) -> bool:
        self.calls.append(("kill", session_id))
        session = self._authorize(owner, session_id)
        await session.close(reason)
        del self.sessions[session_id]
        self.closed.append(session_id)
        return True

    async def close_all(self) -> None:
        """Close whatever a test left open, so the leak guard sees a clean slate."""
        for session_id, (owner, _session) in list(self.sessions.items()):
            await self.kill(owner, session_id, "test cleanup")

    def live_pids(self) -> list[int]:
        return [session.pid for _owner, session in self.sessions.values()]


@contextlib.asynccontextmanager
async def fake_registry(
    h: Harness, config: BashConfig | None = None
) -> AsyncIterator[FakeRegistry]:
    """Override ``ctx.terminals`` with a :class:`FakeRegistry` over a real bash backend.

    Must be entered before anything resolves ``ctx.pty``: the facade is a singleton that
    keeps the registry it was built with.
    """
    backend = BashBackend(h.ctx.subprocess, None, None, config or BashConfig())
    registry = FakeRegistry(backend)
    try:
        with h.ctx.override("terminals", registry):
            yield registry
    finally:
        await registry.close_all()
