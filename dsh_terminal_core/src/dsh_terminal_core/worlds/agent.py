"""The world side: the agent that owns PTYs where the work runs and decides every fact there.

A :class:`WorldAgent` is a headless harness (the provider, the sandbox, the registry and
the bash backend — no tools) whose agents are *tenants*: one per (key, agent id) of the
harnesses that connect. Each request of the protocol becomes the same call a local tool
would make on that harness's registry, so readiness (the prompt tier, the exact stdin
wait, every §14 fence, §19's tiers) runs here, beside the shells, and only its verdict
crosses the wire: a send is one ``send`` request answered by one ``settled`` event
(:mod:`.served` answers one connection's requests).

Output crosses as the session's own scrollback appends (``out``, sequenced per session),
so the harness's mirror numbers and trims lines exactly as the session does; a session
starts with one ``sync`` holding what it printed before anyone observed it.

Two lifetimes. Over ``--stdio`` a connection's end is the harness gone: every session it
opened is closed (whole process tree). A daemon (``world serve --socket``) keeps a
session whose connection ended for its lease (``lease_s``); a connection with the same
key that adopts the agent id takes it back, with everything printed meanwhile, and a
lease that runs out closes it. A key is a namespace and a credential: only its SHA-256
is kept, and a connection sees only its own key's tenants.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ..kernel.agents import Agent
from ..kernel.harness import Harness
from ..registry.scrollback import Scrollback
from ..registry.service import TerminalSessionService
from ..registry.types import BackendSession, SendOperation, SendResult
from .connection import Connection, choose_version
from .frames import DEFAULT_MAX_FRAME, FrameError
from .messages import PROTOCOL_VERSIONS, ProtocolError

if TYPE_CHECKING:
    from .served import Served

__all__ = ["DEFAULT_LEASE_S", "Held", "MirroredSession", "WorldAgent", "world_identity"]

log = logging.getLogger("dsh_terminal_core.worlds")

HANDSHAKE_TIMEOUT_S = 10.0
DEFAULT_LEASE_S = 600


@runtime_checkable
class MirroredSession(Protocol):
    """A backend session whose scrollback can be observed (the bash backend's)."""

    @property
    def scrollback(self) -> Scrollback: ...

    @property
    def max_read_bytes(self) -> int: ...

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]: ...


def world_identity() -> dict[str, Any]:
    """``{bootId, agentStart, pid, host}``: a restarted world never looks like the old one."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return {
        "bootId": boot,
        "agentStart": time.time_ns(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }


def key_digest(key: object) -> str:
    """What is kept of a key: its SHA-256, never the key."""
    text = key if isinstance(key, str) else ""
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.define(eq=False)
class Held:
    """One session the world holds, attached to a connection or waiting out its lease."""

    sid: str
    key: str  # the owning key's digest
    agent_id: str
    tenant: Agent
    session: BackendSession
    type: str
    screen: bool
    harness_sid: str | None
    name: str | None
    opened_by: str | None
    bounds: dict[str, int]
    lease_s: float
    attached: Served | None = None
    seq: int = 0
    unobserve: Callable[[], None] | None = None
    unwatch: Callable[[], None] | None = None
    op: SendOperation | None = None
    op_id: str | None = None
    op_started: float = 0.0
    exited: bool = False
    screen_pending: bool = False
    lease: asyncio.TimerHandle | None = None
    closing: bool = False
    #: The settlement of a send that ended while no harness was attached.
    last_settled: tuple[str, SendResult] | None = None


class WorldAgent:
    """Serves the world protocol over connections, on one headless harness."""

    def __init__(
        self,
        harness: Harness,
        *,
        daemon: bool = False,
        lease_s: float = DEFAULT_LEASE_S,
        world_id: Mapping[str, Any] | None = None,
    ) -> None:
        self._harness = harness
        self.daemon = daemon
        self.default_lease_s = lease_s
        self.world_id = dict(world_id or world_identity())
        self._tenants: dict[tuple[str, str], Agent] = {}
        self.held: dict[str, Held] = {}
        self._connections: set[Served] = set()

    @functools.cached_property
    def terminals(self) -> TerminalSessionService:
        """The harness's registry (looked up once: every send goes through it)."""
        terminals: TerminalSessionService = self._harness.ctx.terminals
        return terminals

    @property
    def sandbox_policy(self) -> Any:
        return self._harness.ctx.sandbox_policy

    def hello(self) -> dict[str, Any]:
        try:
            from importlib.metadata import version

            agent_version = version("dsh-terminal-core")
        except Exception:
            agent_version = "unknown"
        return {
            "versions": list(PROTOCOL_VERSIONS),
            "version": PROTOCOL_VERSIONS[-1],
            "worldId": self.world_id,
            "agentVersion": agent_version,
            "python": sys.version.split()[0],
            # "uvloop" or "asyncio": which loop this agent turns (``worlds/eventloop.py``).
            "eventLoop": type(asyncio.get_running_loop()).__module__.split(".")[0],
            "capabilities": {"backends": self.terminals.list_backends(), "daemon": self.daemon},
            "maxFrame": DEFAULT_MAX_FRAME,
        }

    def tenant(self, key: str, agent_id: str) -> Agent:
        found = self._tenants.get((key, agent_id))
        if found is None or not found.live:
            found = self._harness.create_agent(agent_id)
            self._tenants[(key, agent_id)] = found
        return found

    async def serve(self, connection: Connection) -> None:
        """Handshake, then answer requests until the connection ends.

        Then each session it holds is closed (``--stdio``) or left to its lease (daemon).
        """
        from .served import Served

        try:
            peer = await connection.handshake(self.hello(), timeout_s=HANDSHAKE_TIMEOUT_S)
            choose_version(PROTOCOL_VERSIONS, peer.get("versions"))
        except (ProtocolError, FrameError) as fault:
            connection.bye(fault.code, fault.message)
            return
        except (EOFError, TimeoutError, ConnectionError):
            connection.close()
            return
        client = peer.get("client")
        key = key_digest(client.get("key") if isinstance(client, dict) else None)
        served = Served(self, connection, key)
        self._connections.add(served)
        serving = asyncio.current_task()

        def silent(_why: str) -> None:
            if serving is not None:
                serving.cancel()  # the read it waits in would never return

        heartbeat = asyncio.get_running_loop().create_task(connection.keep_alive(silent))
        try:
            await connection.dispatch(served.handle)
        except asyncio.CancelledError:
            if not connection.closed:
                raise  # a real cancellation, not the heartbeat's
        finally:
            heartbeat.cancel()
            self._connections.discard(served)
            await served.end()
            connection.close()

    # -- holding sessions -----------------------------------------------------------

    def attach(self, held: Held, served: Served) -> None:
        """``served`` drives ``held`` from now on; a previous connection is told so."""
        previous = held.attached
        if previous is not None and previous is not served:
            previous.detached(held, "attached by another harness with the same key")
        if held.lease is not None:
            held.lease.cancel()
            held.lease = None
        held.attached = served

    def release(self, held: Held) -> None:
        """Its connection ended: keep it for its lease (daemon), or close it now."""
        held.attached = None
        if not self.daemon:
            self.start_close(held, "the harness connection ended")
            return
        loop = asyncio.get_running_loop()
        held.lease = loop.call_later(
            held.lease_s, lambda: self.start_close(held, "its lease ran out with no harness")
        )

    def start_close(self, held: Held, reason: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self.close(held, reason))

    async def close(self, held: Held, reason: str) -> None:
        if held.closing:
            return
        held.closing = True
        self.held.pop(held.sid, None)
        if held.lease is not None:
            held.lease.cancel()
        for stop in (held.unobserve, held.unwatch):
            if stop is not None:
                stop()
        with contextlib.suppress(Exception):
            await self.terminals.kill(held.tenant, held.sid, reason)
        if not any(other.tenant is held.tenant for other in self.held.values()):
            self._tenants.pop((held.key, held.agent_id), None)
            with contextlib.suppress(Exception):
                await held.tenant.dispose()

    def stopping(self, reason: str) -> None:
        """Tell each attached harness its sessions end, and why, before they close."""
        for held in list(self.held.values()):
            if held.attached is not None:
                held.attached.detached(held, reason)

    async def aclose(self) -> None:
        """Close every session and dispose every tenant (whole trees)."""
        await asyncio.gather(
            *(self.close(held, "the world agent is stopping") for held in list(self.held.values())),
            return_exceptions=True,
        )
        tenants, self._tenants = list(self._tenants.values()), {}
        for tenant in tenants:
            with contextlib.suppress(Exception):
                await tenant.dispose()
