"""One harness connection to a world agent: its requests, and the events it is sent.

Every request names a session by the world's id (``sid``) and may touch only sessions of
the connection's own key that this connection holds; anything else is ``NO_SESSION``,
the same answer for a session that never existed. A request runs as a task of its own,
started in arrival order, so a slow ``open`` never holds a ``send`` of another session.

A ``send`` is the hot path (SPEC §21: a world's send within local + 0.3 ms), so it costs
no task and no loop turn: it starts the moment its frame is read, unless a request read
before it has not started yet (a ``cancel`` whose send it follows), when it waits its turn
like any other; its settlement leaves at once, in one write with the output before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard, TypeVar

from ..kernel.cancel import Cancellation
from ..kernel.errors import DshError, TerminalError
from ..kernel.secret import Secret
from ..registry.types import (
    ListeningSession,
    RawInputSession,
    SecretPromptSession,
    SendOperation,
    SendRequest,
    SettleNotifying,
    SpawnRequest,
)
from .agent import Held, MirroredSession, WorldAgent
from .connection import Connection
from .frames import Frame
from .messages import (
    ProtocolError,
    error_to_wire,
    field,
    listeners_to_wire,
    optional,
    pattern_from_wire,
    send_result_to_wire,
    status_to_wire,
)

__all__ = ["SCREEN_COALESCE_S", "Served"]

#: A screen session's screen crosses at most this often while it draws (SPEC §22's
#: watchers see it within 100 ms).
SCREEN_COALESCE_S = 0.05
#: A send's collected output (what a background job reads while it runs) streams once
#: the send has run this long; a quick send's comes with its settlement, in one write.
STREAM_AFTER_S = 0.05

log = logging.getLogger("dsh_terminal_core.worlds")

_P = TypeVar("_P")


class Served:
    """The requests of one connection and the sessions it drives."""

    def __init__(self, agent: WorldAgent, connection: Connection, key: str) -> None:
        self._agent = agent
        self._conn = connection
        self._key = key
        self._tasks: set[asyncio.Task[None]] = set()
        #: Requests read whose task has not started yet: a send goes after them.
        self._unstarted = 0
        #: A session event to this connection (what the observers below send through).
        self.send_event = connection.send

    # -- dispatch ---------------------------------------------------------------------

    def handle(self, frame: Frame) -> None:
        request_id = frame.header.get("id")
        if frame.type == "send" and not self._unstarted:
            # Nothing read before it is still waiting to start: it starts now, and a send
            # too malformed to settle is answered as a task's failure would be.
            try:
                self.send_now(frame)
            except (DshError, ProtocolError) as exc:
                self._answer_error(request_id, exc)
            except Exception as exc:
                log.exception("world request 'send' failed")
                self._answer_error(request_id, exc)
            return
        handler = _HANDLERS.get(frame.type)
        if handler is None:
            if frame.type in ("pong", "bye"):
                return
            self._answer_error(
                request_id, ProtocolError("UNKNOWN_TYPE", f"unknown message {frame.type!r}")
            )
            return
        self._unstarted += 1
        task = asyncio.ensure_future(self._run(handler, request_id, frame))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, handler: _Handler, request_id: object, frame: Frame) -> None:
        self._unstarted -= 1
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

    def _get(self, header: Mapping[str, Any]) -> Held:
        sid = field(header, "sid", str)
        held = self._agent.held.get(sid)
        if held is None or held.attached is not self:
            raise TerminalError(f"no session {sid!r} on this world connection", "NO_SESSION")
        return held

    # -- opening and adopting -----------------------------------------------------------

    async def open(self, frame: Frame) -> dict[str, Any]:
        header = frame.header
        agent_id = field(header, "agentId", str)
        tenant = self._agent.tenant(self._key, agent_id)
        mode = optional(header, "sandbox", str)
        if mode is not None:
            self._agent.sandbox_policy.set_mode(tenant, mode)
        request = SpawnRequest(
            type=field(header, "type", str),
            name=None,  # names are the harness's, checked there
            cwd=optional(header, "cwd", str),
            screen=bool(optional(header, "screen", bool)),
            rows=optional(header, "rows", int),
            cols=optional(header, "cols", int),
            opened_by=optional(header, "openedBy", str),
        )
        terminals = self._agent.terminals
        opened = await terminals.spawn(tenant, request, Cancellation())
        session = terminals.get_session(tenant, opened.session_id)
        bounds: dict[str, int] = {}
        if isinstance(session, MirroredSession):
            bounds = {
                "maxLines": session.scrollback.max_lines,
                "maxBytes": session.scrollback.max_bytes,
                "maxReadBytes": session.max_read_bytes,
            }
        lease = optional(header, "leaseS", (int, float))
        held = Held(
            sid=opened.session_id,
            key=self._key,
            agent_id=agent_id,
            tenant=tenant,
            session=session,
            type=request.type,
            screen=request.screen,
            harness_sid=optional(header, "harnessSid", str),
            name=optional(header, "name", str),
            opened_by=request.opened_by,
            bounds=bounds,
            lease_s=float(lease) if lease is not None else self._agent.default_lease_s,
        )
        self._agent.held[held.sid] = held
        self._agent.attach(held, self)
        if isinstance(session, MirroredSession):
            # What it printed before anyone observed it, then every append as it lands.
            self._send_sync(held)
            held.unobserve = session.scrollback.observe(lambda text: _out(held, text))
            held.unwatch = session.watch(lambda: _watched(held))
        return self._row(held) | {"motd": opened.motd}

    def _row(self, held: Held) -> dict[str, Any]:
        return {
            "sid": held.sid,
            "pid": held.session.pid,
            "status": status_to_wire(held.session.status),
            "bounds": held.bounds,
            "type": held.type,
            "screen": held.screen,
            "harnessSid": held.harness_sid,
            "name": held.name,
            "openedBy": held.opened_by,
            "motd": held.session.motd,
        }

    async def ids(self, frame: Frame) -> dict[str, Any]:
        """The harness ids this key's sessions were opened under (never to be minted again)."""
        return {
            "ids": sorted(
                h.harness_sid
                for h in self._agent.held.values()
                if h.key == self._key and h.harness_sid is not None
            )
        }

    async def adopt(self, frame: Frame) -> dict[str, Any]:
        """Take back this key's sessions of ``agentId``: each resyncs, then streams here."""
        agent_id = field(frame.header, "agentId", str)
        rows = []
        for held in list(self._agent.held.values()):
            if held.key != self._key or held.agent_id != agent_id or held.closing:
                continue
            self._agent.attach(held, self)
            self._send_sync(held)
            row = self._row(held)
            if held.op is not None and not held.op.done.done():
                row["inFlight"] = held.op_id  # its settlement comes here now
            if held.last_settled is not None:
                op_id, result = held.last_settled
                row["lastSettled"] = {"op": op_id, "result": send_result_to_wire(result)}
                held.last_settled = None
            rows.append(row)
        return {"sessions": rows}

    # -- the session surface ---------------------------------------------------------

    async def send(self, frame: Frame) -> None:
        """A send read behind a request that had not started yet, in its turn."""
        self.send_now(frame)

    def send_now(self, frame: Frame) -> None:
        """Start a send; no answer: its ``settled`` (a result, or the refusal) is the answer."""
        header = frame.header
        op_id = field(header, "op", str)
        try:
            self._start_send(frame, op_id)
        except (DshError, ProtocolError) as exc:
            sid = header.get("sid")
            wire = (
                {"code": exc.code, "message": exc.message}
                if isinstance(exc, ProtocolError)
                else error_to_wire(exc)
            )
            self._conn.send({"t": "settled", "sid": sid, "op": op_id, "error": wire}, now=True)

    def _start_send(self, frame: Frame, op_id: str) -> None:
        header = frame.header
        held = self._get(header)
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
        op = self._agent.terminals.start_send(held.tenant, held.sid, request)
        held.op, held.op_id = op, op_id
        held.op_started = asyncio.get_running_loop().time()
        told = False

        def settled(done: asyncio.Future[Any]) -> None:
            nonlocal told
            if told:
                return
            told = True
            try:  # runs inside the backend's settling step: nothing may escape into it
                _settled(held, op, op_id, done)
            except Exception:
                log.exception("world: writing the settlement of %s failed", op_id)

        if _is_a(op, SettleNotifying):
            # The settlement leaves in the step the send ends, a loop turn sooner; the
            # done callback stays for a ``done`` cancelled from outside the backend.
            op.when_ended(settled)
        op.done.add_done_callback(settled)

    async def cancel(self, frame: Frame) -> dict[str, Any]:
        held = self._get(frame.header)
        op_id = field(frame.header, "op", str)
        if held.op is not None and held.op_id == op_id and not held.op.done.done():
            await held.op.cancel()
        return {}

    async def signal(self, frame: Frame) -> dict[str, Any]:
        held = self._get(frame.header)
        result = await self._agent.terminals.signal(
            held.tenant, held.sid, field(frame.header, "sig", str)
        )
        return {"delivered": result.delivered, "targetPgid": result.target_pgid}

    async def resize(self, frame: Frame) -> dict[str, Any]:
        held = self._get(frame.header)
        rows, cols = field(frame.header, "rows", int), field(frame.header, "cols", int)
        size = self._agent.terminals.resize(held.tenant, held.sid, rows, cols)
        return {"rows": size.rows, "cols": size.cols}

    async def close(self, frame: Frame) -> dict[str, Any]:
        held = self._get(frame.header)
        reason = optional(frame.header, "reason", str) or "closed by the harness"
        await self._agent.close(held, reason)
        return {"closed": True}

    async def write(self, frame: Frame) -> dict[str, Any]:
        """A person's keys, raw: no readiness, no echo handling (SPEC §22 through a world)."""
        held = self._get(frame.header)
        session = held.session
        if not isinstance(session, RawInputSession):
            raise TerminalError(
                f"session {held.sid} cannot take a person's keys here", "UNSUPPORTED"
            )
        await session.type_raw(frame.payload.decode("utf-8", "replace"))
        return {}

    async def detach(self, frame: Frame) -> dict[str, Any]:
        """Leave a session to its lease (a harness shutting down with ``persist``)."""
        held = self._get(frame.header)
        self._agent.release(held)
        return {"detached": True}

    async def snapshot(self, frame: Frame) -> dict[str, Any]:
        rows = []
        for sid in field(frame.header, "sids", list):
            held = self._agent.held.get(sid) if isinstance(sid, str) else None
            if held is None or held.attached is not self:
                continue
            session = held.session
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

    def _send_sync(self, held: Held) -> None:
        session = held.session
        if not isinstance(session, MirroredSession):
            return
        image = session.scrollback.image()
        header = {
            "t": "sync",
            "sid": held.sid,
            "seq": held.seq,
            "firstLine": image.first_line,
            "openActive": image.open_active,
            "dropped": image.dropped,
            "lines": len(image.lines),
        }
        text = "".join(line + "\n" for line in image.lines) + image.open_text
        self._conn.send(header, text.encode("utf-8", "surrogateescape"))

    def detached(self, held: Held, reason: str) -> None:
        self._conn.send({"t": "detached", "sid": held.sid, "reason": reason})

    async def end(self) -> None:
        """The connection ended: stop answering; each session it held is released."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        for held in list(self._agent.held.values()):
            if held.attached is self:
                self._agent.release(held)


# -- what a session's observers send, to whichever connection holds it now ----------------


def _out(held: Held, text: str) -> None:
    held.seq += 1
    served = held.attached
    if served is not None:
        served.send_event(
            {"t": "out", "sid": held.sid, "seq": held.seq},
            text.encode("utf-8", "surrogateescape"),
            linger=True,
            merge=held,
        )


def _screen_now(held: Held) -> dict[str, Any] | None:
    if not held.screen:
        return None
    try:
        shown = held.session.read_screen()
    except TerminalError:
        return None
    return {"screen": shown.screen.to_wire(), "rows": shown.rows, "cols": shown.cols}


def _schedule_screen(held: Held) -> None:
    """One ``screen`` frame per 50 ms at most while a screen session draws."""
    if held.screen_pending:
        return
    held.screen_pending = True

    def push() -> None:
        held.screen_pending = False
        served = held.attached
        screen = _screen_now(held)
        if screen is not None and served is not None and not held.closing:
            served.send_event({"t": "screen", "sid": held.sid, **screen})

    asyncio.get_running_loop().call_later(SCREEN_COALESCE_S, push)


def _watched(held: Held) -> None:
    served = held.attached
    if held.screen:
        _schedule_screen(held)
    op = held.op
    if (
        served is not None
        and op is not None
        and not op.done.done()
        and asyncio.get_running_loop().time() - held.op_started >= STREAM_AFTER_S
    ):
        collected = op.read_output()
        if collected:
            served.send_event({"t": "opout", "sid": held.sid, "op": held.op_id}, collected.encode())
    status = held.session.status
    if status.kind == "exited" and not held.exited:
        held.exited = True
        if served is not None:
            served.send_event({"t": "exit", "sid": held.sid, "status": status_to_wire(status)})


def _settled(held: Held, op: SendOperation, op_id: str, done: asyncio.Future[Any]) -> None:
    if held.op is op:
        held.op = None
    served = held.attached
    if done.cancelled():
        if served is not None:
            served.send_event(
                {
                    "t": "settled",
                    "sid": held.sid,
                    "op": op_id,
                    "error": {"code": "CANCELLED", "message": "the send was cancelled"},
                },
                now=True,
            )
        return
    exc = done.exception()
    if exc is not None:
        if served is not None:
            served.send_event(
                {"t": "settled", "sid": held.sid, "op": op_id, "error": error_to_wire(exc)},
                now=True,
            )
        return
    result = done.result()
    if served is None:
        held.last_settled = (op_id, result)
        return
    # What the send collected since the last ``opout`` travels as the settlement's
    # payload: one frame fewer to encode, read and dispatch on every send.
    collected = op.read_output()
    session = held.session
    settled: dict[str, Any] = {
        "t": "settled",
        "sid": held.sid,
        "op": op_id,
        "result": send_result_to_wire(result),
        # The facts the harness answers from until the next settlement.
        "cwd": session.cwd(),
    }
    if _is_a(session, ListeningSession):
        settled["listeningNow"] = listeners_to_wire(session.listening())
    if result.input_hidden and _is_a(session, MirroredSession):
        settled["hiddenPrompt"] = session.scrollback.open_line
    screen = _screen_now(held)
    if screen is not None:
        settled["screenNow"] = screen
    served.send_event(settled, collected.encode(), now=True)


#: Whether a session's class has a protocol's members, by (class, protocol): checking a
#: runtime protocol walks its members each time, a cost every settlement would pay.
_KINDS: dict[tuple[type, type], bool] = {}


def _is_a(session: object, protocol: type[_P]) -> TypeGuard[_P]:
    key = (type(session), protocol)
    kind = _KINDS.get(key)
    if kind is None:
        kind = _KINDS[key] = isinstance(session, protocol)
    return kind


_Handler = Callable[[Served, Frame], Any]
_HANDLERS: dict[str, Any] = {
    "open": Served.open,
    "ids": Served.ids,
    "adopt": Served.adopt,
    "send": Served.send,
    "cancel": Served.cancel,
    "signal": Served.signal,
    "resize": Served.resize,
    "close": Served.close,
    "detach": Served.detach,
    "write": Served.write,
    "snapshot": Served.snapshot,
    "ping": Served.ping,
}
