"""The world side: the agent that owns PTYs where the work runs and decides every fact there.

A :class:`WorldAgent` is a headless harness (the provider, the sandbox, the registry and
the bash backend — no tools) whose agents are *tenants*, one per agent id of the harness
that connected. Each request of the protocol becomes the same call a local tool would
make on that harness's registry, so readiness (the prompt tier, the exact stdin wait,
every §14 fence, §19's tiers) runs here, beside the shells, and only its verdict crosses
the wire: a send is one ``send`` request answered by one ``settled`` event.

Output crosses as the session's own scrollback appends (``out``, sequenced per session),
so the harness's mirror numbers and trims lines exactly as the session does; a session
starts with one ``sync`` holding what it printed before anyone observed it. A send's own
collected output (what a background job reads) crosses as ``opout`` before its
``settled``; a session's end as ``exit``.

In ``--stdio`` mode a connection's end is the harness gone: every session it opened is
closed (whole process tree) and the agent returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from ..kernel.agents import Agent
from ..kernel.cancel import Cancellation
from ..kernel.errors import DshError, TerminalError
from ..kernel.harness import Harness
from ..kernel.secret import Secret
from ..registry.scrollback import Scrollback
from ..registry.service import TerminalSessionService
from ..registry.types import (
    BackendSession,
    ListeningSession,
    SecretPromptSession,
    SendOperation,
    SendRequest,
    SpawnRequest,
)
from .connection import Connection
from .frames import DEFAULT_MAX_FRAME, Frame
from .messages import (
    PROTOCOL_VERSIONS,
    ProtocolError,
    error_to_wire,
    field,
    listeners_to_wire,
    optional,
    pattern_from_wire,
    send_result_to_wire,
    status_to_wire,
)

__all__ = ["WorldAgent", "world_identity"]

log = logging.getLogger("dsh_terminal_core.worlds")

HANDSHAKE_TIMEOUT_S = 10.0
# Output is cut into frames well below the agreed maximum.
_OUT_CHUNK = 256 * 1024
#: A screen session's screen crosses at most this often while it draws (SPEC §22's
#: watchers see it within 100 ms).
SCREEN_COALESCE_S = 0.05


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


@attrs.define(eq=False)
class _Live:
    """One session this connection drives."""

    sid: str
    tenant: Agent
    session: BackendSession
    seq: int = 0
    unobserve: Callable[[], None] | None = None
    unwatch: Callable[[], None] | None = None
    op: SendOperation | None = None
    op_id: str | None = None
    exited: bool = False
    screen: bool = False
    screen_pending: bool = False


class WorldAgent:
    """Serves the world protocol over connections, on one headless harness."""

    def __init__(self, harness: Harness, *, world_id: Mapping[str, Any] | None = None) -> None:
        self._harness = harness
        self.world_id = dict(world_id or world_identity())
        self._tenants: dict[str, Agent] = {}

    @property
    def _terminals(self) -> TerminalSessionService:
        terminals: TerminalSessionService = self._harness.ctx.terminals
        return terminals

    def hello(self) -> dict[str, Any]:
        from .. import __name__ as package

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
            "package": package,
            "capabilities": {"backends": self._terminals.list_backends()},
            "maxFrame": DEFAULT_MAX_FRAME,
        }

    def _tenant(self, agent_id: str) -> Agent:
        tenant = self._tenants.get(agent_id)
        if tenant is None or not tenant.live:
            tenant = self._harness.create_agent(agent_id)
            self._tenants[agent_id] = tenant
        return tenant

    async def serve(self, connection: Connection) -> None:
        """Handshake, then answer requests until the connection ends; close what it opened."""
        try:
            peer = await connection.handshake(self.hello(), timeout_s=HANDSHAKE_TIMEOUT_S)
            _check_versions(peer)
        except ProtocolError as fault:
            connection.bye(fault.code, fault.message)
            return
        except (EOFError, TimeoutError):
            connection.close()
            return
        served = _Served(self, connection)
        try:
            async for frame in connection.frames():
                served.handle(frame)
        finally:
            await served.end()
            connection.close()

    async def aclose(self) -> None:
        """Dispose every tenant (their sessions close, whole tree)."""
        tenants, self._tenants = list(self._tenants.values()), {}
        for tenant in tenants:
            with contextlib.suppress(Exception):
                await tenant.dispose()


def _check_versions(peer: Mapping[str, Any]) -> None:
    from .connection import choose_version

    choose_version(PROTOCOL_VERSIONS, peer.get("versions"))


class _Served:
    """One connection's requests and the sessions it drives."""

    def __init__(self, agent: WorldAgent, connection: Connection) -> None:
        self._agent = agent
        self._conn = connection
        self._live: dict[str, _Live] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    # -- dispatch ---------------------------------------------------------------------

    def handle(self, frame: Frame) -> None:
        header = frame.header
        request_id = header.get("id")
        handler = _HANDLERS.get(frame.type)
        if handler is None:
            if frame.type in ("pong", "bye"):
                return
            self._answer_error(
                request_id, ProtocolError("UNKNOWN_TYPE", f"unknown message {frame.type!r}")
            )
            return
        task = asyncio.ensure_future(self._run(handler, request_id, frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, handler: _Handler, request_id: object, frame: Frame) -> None:
        try:
            answer = await handler(self, frame)
        except asyncio.CancelledError:
            raise
        except (DshError, ProtocolError) as exc:
            self._answer_error(request_id, exc)
            return
        except Exception as exc:
            log.exception("world request %r failed", frame.type)
            self._answer_error(request_id, exc)
            return
        if answer is not None:
            self._conn.send({"t": "ok", "re": request_id, **answer})

    def _answer_error(self, request_id: object, exc: BaseException) -> None:
        if isinstance(exc, ProtocolError):
            wire = {"code": exc.code, "message": exc.message}
        else:
            wire = error_to_wire(exc)
        self._conn.send({"t": "error", "re": request_id, **wire})

    def _get(self, header: Mapping[str, Any]) -> _Live:
        sid = field(header, "sid", str)
        live = self._live.get(sid)
        if live is None:
            raise TerminalError(f"no session {sid!r} on this world connection", "NO_SESSION")
        return live

    # -- requests ---------------------------------------------------------------------

    async def open(self, frame: Frame) -> dict[str, Any]:
        header = frame.header
        tenant = self._agent._tenant(field(header, "agentId", str))
        mode = optional(header, "sandbox", str)
        if mode is not None:
            policy = self._agent._harness.ctx.sandbox_policy
            policy.set_mode(tenant, mode)
        request = SpawnRequest(
            type=field(header, "type", str),
            name=None,  # names are the harness's, checked there
            cwd=optional(header, "cwd", str),
            screen=bool(optional(header, "screen", bool)),
            rows=optional(header, "rows", int),
            cols=optional(header, "cols", int),
            opened_by=optional(header, "openedBy", str),
        )
        terminals = self._agent._terminals
        opened = await terminals.spawn(tenant, request, Cancellation())
        session = terminals.get_session(tenant, opened.session_id)
        live = _Live(sid=opened.session_id, tenant=tenant, session=session, screen=request.screen)
        self._live[live.sid] = live
        bounds: dict[str, int] = {}
        if isinstance(session, MirroredSession):
            scrollback = session.scrollback
            bounds = {
                "maxLines": scrollback.max_lines,
                "maxBytes": scrollback.max_bytes,
                "maxReadBytes": session.max_read_bytes,
            }
            # What it printed before anyone observed it, then every append as it lands.
            self._send_sync(live, scrollback)
            live.unobserve = scrollback.observe(lambda text: self._send_out(live, text))
            live.unwatch = session.watch(lambda: self._on_watch(live))
        return {
            "sid": live.sid,
            "pid": opened.pid,
            "motd": opened.motd,
            "status": status_to_wire(opened.status),
            "bounds": bounds,
        }

    async def send(self, frame: Frame) -> dict[str, Any]:
        header = frame.header
        live = self._get(header)
        keys = optional(header, "keys", list)
        if keys is not None and not all(isinstance(k, str) for k in keys):
            raise ProtocolError("MALFORMED_FRAME", "keys must be strings")
        secret = Secret(frame.payload.decode()) if header.get("secret") else None
        wait_for = header.get("waitFor")
        request = SendRequest(
            text=optional(header, "text", str) or "",
            submit=field(header, "submit", bool),
            timeout_ms=optional(header, "timeoutMs", int),
            max_bytes=optional(header, "maxBytes", int),
            keys=tuple(keys) if keys is not None else None,
            secret=secret,
            wait_for=pattern_from_wire(wait_for) if wait_for is not None else None,
        )
        op_id = field(header, "op", str)
        op = self._agent._terminals.start_send(live.tenant, live.sid, request)
        live.op, live.op_id = op, op_id
        op.done.add_done_callback(lambda done: self._on_settled(live, op, op_id, done))
        return {}

    async def cancel(self, frame: Frame) -> dict[str, Any]:
        live = self._get(frame.header)
        op_id = field(frame.header, "op", str)
        if live.op is not None and live.op_id == op_id and not live.op.done.done():
            await live.op.cancel()
        return {}

    async def signal(self, frame: Frame) -> dict[str, Any]:
        live = self._get(frame.header)
        result = await self._agent._terminals.signal(
            live.tenant, live.sid, field(frame.header, "sig", str)
        )
        return {"delivered": result.delivered, "targetPgid": result.target_pgid}

    async def resize(self, frame: Frame) -> dict[str, Any]:
        live = self._get(frame.header)
        size = self._agent._terminals.resize(
            live.tenant,
            live.sid,
            field(frame.header, "rows", int),
            field(frame.header, "cols", int),
        )
        return {"rows": size.rows, "cols": size.cols}

    async def screen(self, frame: Frame) -> dict[str, Any]:
        live = self._get(frame.header)
        shown = self._agent._terminals.read_screen(live.tenant, live.sid)
        return {"screen": shown.screen.to_wire(), "rows": shown.rows, "cols": shown.cols}

    async def close(self, frame: Frame) -> dict[str, Any]:
        live = self._get(frame.header)
        reason = optional(frame.header, "reason", str) or "closed by the harness"
        await self._close(live, reason)
        return {"closed": True}

    async def snapshot(self, frame: Frame) -> dict[str, Any]:
        sids = field(frame.header, "sids", list)
        rows = []
        for sid in sids:
            live = self._live.get(sid) if isinstance(sid, str) else None
            if live is None:
                continue
            session = live.session
            rows.append(
                {
                    "sid": sid,
                    "cwd": session.cwd(),
                    "status": status_to_wire(session.status),
                    "listening": listeners_to_wire(
                        session.listening() if isinstance(session, ListeningSession) else ()
                    ),
                    "hiddenPrompt": (
                        session.hidden_prompt()
                        if isinstance(session, SecretPromptSession)
                        else None
                    ),
                }
            )
        return {"sessions": rows}

    async def ping(self, frame: Frame) -> None:
        self._conn.send({"t": "pong", "n": frame.header.get("n")})

    # -- events -----------------------------------------------------------------------

    def _send_sync(self, live: _Live, scrollback: Scrollback) -> None:
        image = scrollback.image()
        header = {
            "t": "sync",
            "sid": live.sid,
            "seq": live.seq,
            "firstLine": image.first_line,
            "openActive": image.open_active,
            "dropped": image.dropped,
            "lines": len(image.lines),
        }
        text = "".join(line + "\n" for line in image.lines) + image.open_text
        self._conn.send(header, text.encode("utf-8", "surrogateescape"))

    def _send_out(self, live: _Live, text: str) -> None:
        data = text.encode("utf-8", "surrogateescape")
        live.seq += 1
        # One append is one frame (the mirror appends it whole); it is far below maxFrame
        # unless a program writes megabytes at once, which is then cut on line ends.
        if len(data) <= _OUT_CHUNK:
            self._conn.send({"t": "out", "sid": live.sid, "seq": live.seq}, data)
            return
        self._conn.send({"t": "out", "sid": live.sid, "seq": live.seq, "big": True}, data)

    def _screen_now(self, live: _Live) -> dict[str, Any] | None:
        if not live.screen:
            return None
        try:
            shown = live.session.read_screen()
        except TerminalError:
            return None
        return {"screen": shown.screen.to_wire(), "rows": shown.rows, "cols": shown.cols}

    def _schedule_screen(self, live: _Live) -> None:
        """One ``screen`` frame per 50 ms at most while a screen session draws."""
        if live.screen_pending:
            return
        live.screen_pending = True

        def push() -> None:
            live.screen_pending = False
            screen = self._screen_now(live)
            if screen is not None and live.sid in self._live:
                self._conn.send({"t": "screen", "sid": live.sid, **screen})

        asyncio.get_running_loop().call_later(SCREEN_COALESCE_S, push)

    def _on_watch(self, live: _Live) -> None:
        if live.screen:
            self._schedule_screen(live)
        op = live.op
        if op is not None and not op.done.done():
            collected = op.read_output()
            if collected:
                self._conn.send(
                    {"t": "opout", "sid": live.sid, "op": live.op_id}, collected.encode()
                )
        status = live.session.status
        if status.kind == "exited" and not live.exited:
            live.exited = True
            self._conn.send({"t": "exit", "sid": live.sid, "status": status_to_wire(status)})

    def _on_settled(
        self, live: _Live, op: SendOperation, op_id: str, done: asyncio.Future[Any]
    ) -> None:
        if live.op is op:
            live.op = None
        if done.cancelled():
            self._conn.send(
                {
                    "t": "settled",
                    "sid": live.sid,
                    "op": op_id,
                    "error": {"code": "CANCELLED", "message": "the send was cancelled"},
                }
            )
            return
        exc = done.exception()
        if exc is not None:
            self._conn.send(
                {"t": "settled", "sid": live.sid, "op": op_id, "error": error_to_wire(exc)}
            )
            return
        collected = op.read_output()
        if collected:
            self._conn.send({"t": "opout", "sid": live.sid, "op": op_id}, collected.encode())
        result = done.result()
        session = live.session
        settled: dict[str, Any] = {
            "t": "settled",
            "sid": live.sid,
            "op": op_id,
            "result": send_result_to_wire(result),
            # The facts the harness answers from until the next settlement.
            "cwd": session.cwd(),
        }
        if isinstance(session, ListeningSession):
            settled["listeningNow"] = listeners_to_wire(session.listening())
        if result.input_hidden and isinstance(session, MirroredSession):
            settled["hiddenPrompt"] = session.scrollback.open_line
        screen = self._screen_now(live)
        if screen is not None:
            settled["screenNow"] = screen
        self._conn.send(settled)

    # -- the end ----------------------------------------------------------------------

    async def _close(self, live: _Live, reason: str) -> None:
        self._live.pop(live.sid, None)
        for stop in (live.unobserve, live.unwatch):
            if stop is not None:
                stop()
        with contextlib.suppress(TerminalError):
            await self._agent._terminals.kill(live.tenant, live.sid, reason)

    async def end(self) -> None:
        """The connection ended: stop answering, close every session it drove."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        lives = list(self._live.values())
        await asyncio.gather(
            *(self._close(live, "the harness connection ended") for live in lives),
            return_exceptions=True,
        )


_Handler = Callable[[_Served, Frame], Any]
_HANDLERS: dict[str, Any] = {
    "open": _Served.open,
    "send": _Served.send,
    "cancel": _Served.cancel,
    "signal": _Served.signal,
    "resize": _Served.resize,
    "screen": _Served.screen,
    "close": _Served.close,
    "snapshot": _Served.snapshot,
    "ping": _Served.ping,
}
