"""Agents by identity over HTTP: made on first use, kept across disconnects, reaped when idle.

Over stdio a connection is an agent. Over HTTP a client comes and goes (each request is
a connection of its own; an SDK client also holds one long GET stream while it is
attached), so the agent belongs to the identity its token names. Every request holds a
:class:`Lease` on its identity for as long as it is open. When the last lease of an
identity is released — its last disconnect — a timer of ``idle_ttl_s`` starts; a new
lease stops it. If it fires, the identity is forgotten at once (a request arriving from
then on gets a fresh agent) and its old agent is disposed, which closes every session it
owned with its whole process tree.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..kernel.agents import Agent
from ..kernel.errors import DisposeError, DshError

__all__ = ["Identities", "Lease"]

log = logging.getLogger("dsh_terminal_core.mcp_server")


class _Entry:
    __slots__ = ("agent", "leases", "timer")

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.leases = 0
        self.timer: asyncio.TimerHandle | None = None


class Lease:
    """One open connection of an identity; ``agent`` is what its calls act as."""

    __slots__ = ("_entry", "_owner", "_released", "agent")

    def __init__(self, owner: Identities, entry: _Entry) -> None:
        self._owner = owner
        self._entry = entry
        self._released = False
        self.agent = entry.agent

    def release(self) -> None:
        """End this connection; idempotent."""
        if not self._released:
            self._released = True
            self._owner._release(self._entry)


class Identities:
    """The agent of each identity, with idle reaping; :meth:`close` disposes them all.

    ``create`` makes an agent for an id (the harness's ``create_agent``, so harness
    shutdown remains the backstop). ``idle_ttl_s`` counts from the identity's last
    disconnect.
    """

    def __init__(self, create: Callable[[str], Agent], idle_ttl_s: float) -> None:
        if not idle_ttl_s > 0:
            raise ValueError("idle_ttl_s must be positive")
        self._create = create
        self._ttl_s = idle_ttl_s
        self._entries: dict[str, _Entry] = {}
        self._reaping: set[asyncio.Task[None]] = set()
        self._closed = False

    def lease(self, agent_id: str) -> Lease:
        """Open a connection for ``agent_id``, making its agent if it has none.

        Raises:
            DshError: ``SERVICE_DISPOSING`` once :meth:`close` has begun.
        """
        if self._closed:
            raise DshError("the server is shutting down", "SERVICE_DISPOSING")
        entry = self._entries.get(agent_id)
        if entry is None:
            entry = _Entry(self._create(agent_id))
            self._entries[agent_id] = entry
            log.info("identity %r connected with no live agent; it has a new one", agent_id)
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        entry.leases += 1
        return Lease(self, entry)

    def agent(self, agent_id: str) -> Agent | None:
        """The live agent of ``agent_id`` now, or None (never connected, or reaped)."""
        entry = self._entries.get(agent_id)
        return entry.agent if entry is not None and entry.agent.live else None

    def connected(self, agent_id: str) -> int:
        """How many connections ``agent_id`` has open now (0 when unknown)."""
        entry = self._entries.get(agent_id)
        return 0 if entry is None else entry.leases

    def _release(self, entry: _Entry) -> None:
        entry.leases -= 1
        if entry.leases > 0 or self._closed or self._entries.get(entry.agent.id) is not entry:
            return
        loop = asyncio.get_running_loop()
        entry.timer = loop.call_later(self._ttl_s, self._expire, entry)

    def _expire(self, entry: _Entry) -> None:
        entry.timer = None
        agent_id = entry.agent.id
        if entry.leases > 0 or self._entries.get(agent_id) is not entry:
            return  # reconnected (or already gone) since the timer was set
        del self._entries[agent_id]
        task = asyncio.get_running_loop().create_task(self._reap(entry.agent))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def _reap(self, agent: Agent) -> None:
        log.info(
            "identity %r idle for %g s since its last disconnect; closing its sessions",
            agent.id,
            self._ttl_s,
        )
        try:
            await agent.dispose()
        except Exception as exc:  # reported; the sessions stay retryable at shutdown
            log.error("closing the sessions of idle identity %r failed: %s", agent.id, exc)
            return
        log.info("identity %r reaped", agent.id)

    async def close(self) -> None:
        """Refuse new leases, stop every timer and dispose every agent, reaped ones included.

        Raises:
            DisposeError: some agents could not close all their sessions (the rest did).
        """
        self._closed = True
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            if entry.timer is not None:
                entry.timer.cancel()
                entry.timer = None
        outcomes = await asyncio.gather(
            *(entry.agent.dispose() for entry in entries),
            *list(self._reaping),
            return_exceptions=True,
        )
        errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if errors:
            raise DisposeError("some identities did not close cleanly", errors)
