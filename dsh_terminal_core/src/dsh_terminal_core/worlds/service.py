"""``ctx.worlds``: the configured worlds, each reached through one link, opened on first use.

The registry asks a world for a backend of a type (:meth:`WorldsService.backend`); the
first session opened in a world starts its command (or connects to its daemon's socket)
and shakes hands, and every later session shares that link. A world whose agent ended
is reached afresh by the next open (its old sessions already read ``exited``, naming
why); a new ``worldId`` is never taken for the old one.

Reattach (SPEC §21). A daemon keeps a harness's sessions for their lease after the
harness dies. When an agent is created, :meth:`WorldsService.adopt` asks every
``socket`` world for that agent id's sessions under the world's ``key`` and publishes
each in the registry under the id it had, with its scrollback as the world kept it —
what was printed while no harness was attached is readable by absolute line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from ..kernel.agents import Agent, Notice
from ..kernel.errors import ErrorCode, TerminalError
from ..registry.types import TerminalBackend
from .backend import WorldBackend, session_from_row
from .config import LOCAL, WorldEntry, WorldsConfig
from .link import WorldLink, connect, connect_socket
from .session import WorldSession

log = logging.getLogger("dsh_terminal_core.worlds")

#: How long a first tool call waits for its agent's sessions to come back.
ADOPT_WAIT_S = 1.0
#: Reconnecting to a daemon whose connection was lost: the first retry, and the longest wait.
RECONNECT_FIRST_S = 0.05
RECONNECT_MAX_S = 2.0

__all__ = ["WorldsService"]


#: What proves no daemon serves a world any more: the relay's words for a socket that
#: refuses, and a container runtime's for a container that is not running (stopped,
#: killed, paused, removed) — podman, docker and kubectl, in their own words.
_NOT_RUNNING = (
    "no world daemon answers",
    "container state improper",
    "is not running",
    "is paused",
    "no such container",
    "container not found",
    "(NotFound)",
)
#: How long a lost command world's command has to exit and say why (a relay's last words).
LAST_WORDS_S = 0.25
#: How long closing waits for a reconnection it cancelled to finish.
_EXIT_WAIT_S = 5.0
#: How long the world's ``state`` command may take to say what became of it.
STATE_TIMEOUT_S = 5.0


def _daemon_gone(said: str) -> bool:
    """The words prove no daemon serves the world any more (not a channel's hiccup).

    A command that fails otherwise (an API server unreachable for ``kubectl``) may come
    back, and is retried.
    """
    return any(words in said for words in _NOT_RUNNING)


def _proof(said: str) -> str:
    """The last line of a command's stderr that proves its daemon gone."""
    lines = [line for line in said.splitlines() if _daemon_gone(line)]
    return lines[-1].strip()[-500:] if lines else said.strip()[-500:]


async def _state_of(command: tuple[str, ...]) -> str:
    """The first line of what the world's ``state`` command prints, or why it could not."""
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
    except OSError as exc:
        return f"{command[0]!r} could not start: {exc.strerror or exc}"
    try:
        out, _ = await asyncio.wait_for(process.communicate(), STATE_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return f"{command[0]!r} said nothing within {STATE_TIMEOUT_S:g} s"
    lines = out.decode("utf-8", "replace").strip().splitlines()
    return lines[0][:300] if lines else f"{command[0]!r} printed nothing"


class WorldsService:
    """Links to the configured worlds, and a backend per (world, type)."""

    def __init__(
        self, config: WorldsConfig, sandbox_mode: Callable[[Any], str | None] | None = None
    ) -> None:
        self.config = config
        self._sandbox_mode = sandbox_mode or (lambda _owner: None)
        self._links: dict[str, WorldLink] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._closed = False
        # A daemon's sessions, by world and the world's id: resumed on a new link.
        self._held: dict[str, dict[str, tuple[Agent, WorldSession]]] = {}
        self._reconnecting: dict[str, asyncio.Task[None]] = {}
        #: Set when the harness shuts down cleanly (hook ``dsh_harness_closing``).
        self.shutting_down = False

    @property
    def default(self) -> str:
        return self.config.default

    def names(self) -> list[str]:
        return [LOCAL, *self.config.worlds]

    def entry(self, world: str) -> WorldEntry:
        found = self.config.worlds.get(world)
        if found is None:
            raise TerminalError(
                f"no world named {world!r} (configured: {', '.join(self.names())})",
                ErrorCode.INVALID_ARGUMENT,
            )
        return found

    def backend(self, world: str, type: str) -> TerminalBackend:
        """The backend for ``type`` in ``world`` (the world says at open if it lacks it)."""
        entry = self.entry(world)
        backend = WorldBackend(
            world, type, lambda: self.link(world), self._sandbox_mode, lease_s=entry.lease_s
        )
        backend.on_session = lambda owner, session: self._hold(world, owner, session)
        return backend

    def _hold(self, world: str, owner: Agent, session: WorldSession) -> None:
        entry = self.entry(world)
        session.detach_on_close = lambda: self.shutting_down and entry.persist
        if session.resumable:
            self._held.setdefault(world, {})[session.sid] = (owner, session)

    def _lost(self, world: str, link: WorldLink, why: str) -> None:
        """A daemon's connection ended: reach it again, in the background, and resume."""
        if self._closed or not self._held.get(world) or world in self._reconnecting:
            return
        task = asyncio.get_running_loop().create_task(self._reconnect(world, link))
        self._reconnecting[world] = task
        task.add_done_callback(lambda _t: self._reconnecting.pop(world, None))

    async def _reconnect(self, world: str, old: WorldLink) -> None:
        entry = self.entry(world)
        said = await old.last_words(LAST_WORDS_S, _daemon_gone)
        if _daemon_gone(said):
            # The command's last words (a relay that found nothing listening any more, a
            # runtime whose container stopped) already prove it: no new command is started
            # only to say the same.
            await self._daemon_is_gone(world, _proof(said))
            return
        delay = RECONNECT_FIRST_S
        give_up = asyncio.get_running_loop().time() + entry.lease_s
        while not self._closed:
            try:
                link = await self.link(world)
                break
            except TerminalError as exc:
                if _daemon_gone(exc.fact):
                    await self._daemon_is_gone(world, exc.fact)
                    return
                if asyncio.get_running_loop().time() >= give_up:
                    self._end_all(world, f"world {world!r} stayed out of reach for its lease")
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, RECONNECT_MAX_S)
        else:
            return
        if dict(link.world_id) != dict(old.world_id):
            self._end_all(
                world, f"world {world!r} restarted (a new worldId): its sessions are gone"
            )
            return
        held = self._held.get(world, {})
        for agent in {id(owner): owner for owner, _ in held.values()}.values():
            try:
                answer = await link.call({"t": "adopt", "agentId": agent.id})
            except TerminalError as exc:
                log.warning("world %r: cannot resume %r's sessions: %s", world, agent.id, exc)
                continue
            back = {row.get("sid"): row for row in answer.get("sessions") or []}
            for sid, (owner, session) in list(held.items()):
                if owner is not agent:
                    continue
                row = back.get(sid)
                if row is None:
                    held.pop(sid, None)
                    session.end(f"world {world!r} no longer holds {sid}")
                else:
                    session.resume(link, row)

    async def _daemon_is_gone(self, world: str, said: str) -> None:
        """Nothing listens: the daemon died, and its sessions with it (its guardian and
        bubblewrap's --die-with-parent see to that), or its container is not running."""
        why = f"world {world!r}'s daemon is gone: {said}"
        state = self.entry(world).state
        if state is not None:
            why += f" (its state: {await _state_of(state)})"
        self._end_all(world, why)

    def _end_all(self, world: str, why: str) -> None:
        for _owner, session in self._held.pop(world, {}).values():
            session.end(why)

    async def link(self, world: str) -> WorldLink:
        """The world's live link, started now if there is none or the last one ended."""
        if self._closed:
            raise TerminalError("the worlds service is closed", ErrorCode.SERVICE_DISPOSING)
        entry = self.entry(world)
        lock = self._connecting.setdefault(world, asyncio.Lock())
        async with lock:
            current = self._links.get(world)
            if current is not None and current.lost is None:
                return current
            if current is not None:
                await current.aclose()  # its agent is gone: reap the command, free its pipes
            client = {"key": entry.key}
            beat = entry.heartbeat_s
            if entry.socket is not None:
                link = await connect_socket(world, entry.socket, client=client, heartbeat_s=beat)
            else:
                assert entry.command is not None
                link = await connect(world, entry.command, client=client, heartbeat_s=beat)
            link.on_lost = lambda why, link=link: self._lost(world, link, why)
            self._links[world] = link
            return link

    @staticmethod
    def keeps_sessions(entry: WorldEntry) -> bool:
        """The world may hold sessions of an earlier harness: a daemon's socket, or a
        command with a ``key`` (a relay to a daemon, the shape ``kubectl exec -i ... world
        --stdio --socket`` and ``docker exec -i`` take)."""
        return entry.socket is not None or entry.key is not None

    async def adopt(self, agent: Agent, registry: Any) -> list[str]:
        """Publish every session a daemon kept for ``agent``'s id; return their ids.

        A world that cannot be reached is skipped with a log line (its sessions stay
        there for their lease); a command world whose agent is no daemon has nothing to
        give back; an id already taken here gets a fresh one, said in a notice.
        """
        adopted: list[str] = []
        for world, entry in self.config.worlds.items():
            if not self.keeps_sessions(entry):
                continue
            try:
                link = await self.link(world)
                capabilities = link.hello.get("capabilities") or {}
                resumable = isinstance(capabilities, dict) and bool(capabilities.get("daemon"))
                if not resumable:
                    continue
                answer = await link.call({"t": "adopt", "agentId": agent.id})
            except TerminalError as exc:
                log.warning("world %r: cannot adopt %r's sessions: %s", world, agent.id, exc)
                continue
            for row in answer.get("sessions") or []:
                session = session_from_row(link, world, row, resumable=resumable)
                self._hold(world, agent, session)
                wanted = row.get("harnessSid")
                session_id = registry.adopt(
                    agent,
                    session,
                    session_id=wanted if isinstance(wanted, str) else None,
                    type=str(row.get("type") or "shell"),
                    name=row.get("name") if isinstance(row.get("name"), str) else None,
                    opened_by=row.get("openedBy") if isinstance(row.get("openedBy"), str) else None,
                    world=world,
                )
                adopted.append(session_id)
                said = f"{session_id} came back from world {world!r}"
                if wanted is not None and wanted != session_id:
                    said += f" (it was {wanted}; that id is taken here)"
                last = row.get("lastSettled")
                if isinstance(last, dict):
                    result = last.get("result") or {}
                    said += (
                        f"; its last send settled {result.get('waitReason')}"
                        f" (exit {result.get('exitCode')}) while no harness was attached"
                    )
                agent.notify(
                    Notice(kind="world_adopted", text=said, data={"sessionId": session_id})
                )
        return adopted

    def world_id(self, world: str) -> dict[str, Any] | None:
        link = self._links.get(world)
        return dict(link.world_id) if link is not None else None

    async def aclose(self) -> None:
        """End every link; each world's agent closes its sessions and exits."""
        self._closed = True
        reconnecting = list(self._reconnecting.values())
        for task in reconnecting:
            task.cancel()
        if reconnecting:  # done before the links go (a command it started is reaped)
            await asyncio.wait(reconnecting, timeout=_EXIT_WAIT_S)
        links, self._links = list(self._links.values()), {}
        for link in links:
            with contextlib.suppress(Exception):
                await link.aclose()
