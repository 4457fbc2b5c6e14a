"""A session that lives in a world, as the registry and every consumer see it here.

:class:`WorldSession` is a :class:`~dsh_terminal_core.registry.types.BackendSession`
whose synchronous surface — ``read``, ``complete_lines_since``, ``retained_lines``,
``open_line``, ``watch``, ``status``, ``cwd``, ``listening``, ``hidden_prompt`` — answers
from state the world pushes, with no round trip: a mirror
:class:`~dsh_terminal_core.registry.scrollback.Scrollback` fed the session's own
appends (so lines number, trim and read exactly as they do in the world), the last
status, and the facts of the last settlement. Only a send, a cancel, a signal, a resize
and a close cross the wire.

A send is decided in the world: ``start_send`` reserves here (``SEND_ACTIVE`` at once,
as locally), writes one ``send`` frame, and the world's readiness ladder settles it;
the :class:`WorldSendOperation` resolves with the world's own ``SendResult``. If the
world's agent goes away, every send in flight settles ``session_exit`` at once and the
session reads ``exited``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from ..kernel.errors import ErrorCode, TerminalError
from ..kernel.subscribe import subscribe
from ..provider.listening import Listener
from ..registry.scrollback import Scrollback, ScrollbackImage
from ..registry.types import (
    ReadRequest,
    ReadResult,
    RetainedLines,
    ScreenRead,
    ScreenView,
    SendRequest,
    SendResult,
    SessionStatus,
    SignalResult,
    TerminalSize,
    WaitReason,
)
from .frames import Frame
from .link import WorldLink
from .messages import (
    error_from_wire,
    highlights_from_wire,
    listeners_from_wire,
    pattern_to_wire,
    send_result_from_wire,
    status_from_wire,
)

__all__ = ["WorldSendOperation", "WorldSession"]

_op_ids = itertools.count(1)
#: A send that names no timeout is bounded by the backend's default (30 s).
DEFAULT_BUDGET_MS = 30_000
GUARD_MARGIN_S = 2.0


def _retrieve(answer: asyncio.Future[Any]) -> None:
    """A request nobody awaits: its failure is already the session's to report."""
    if not answer.cancelled():
        answer.exception()


class WorldSendOperation:
    """A send running in a world; ``done`` gets the world's settlement."""

    def __init__(self, session: WorldSession, op_id: str, timeout_ms: int | None = None) -> None:
        self._session = session
        self.op_id = op_id
        loop = asyncio.get_running_loop()
        self._done: asyncio.Future[SendResult] = loop.create_future()
        self._collected: list[str] = []
        self._cancel: asyncio.Task[None] | None = None
        #: When the harness gives up on a settlement it cannot receive (the link is down):
        #: the send's own budget, plus a margin for the world to say it first.
        budget_s = (timeout_ms or DEFAULT_BUDGET_MS) / 1000 + GUARD_MARGIN_S
        self.deadline = loop.time() + budget_s

    @property
    def done(self) -> asyncio.Future[SendResult]:
        return self._done

    def result(self) -> Awaitable[SendResult]:
        waiter: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()

        def copy(done: asyncio.Future[SendResult]) -> None:
            if waiter.done():
                return
            if done.cancelled():
                waiter.cancel()
            elif (exc := done.exception()) is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(done.result())

        if self._done.done():
            copy(self._done)
        else:
            self._done.add_done_callback(copy)
        return waiter

    def collect(self, text: str) -> None:
        self._collected.append(text)

    def read_output(self) -> str:
        """What the send collected in the world since the previous call (a job's cursor)."""
        text = "".join(self._collected)
        self._collected.clear()
        return text

    def cancel(self) -> asyncio.Task[None]:
        """A real Ctrl-C in the world: unread input flushed, the foreground group SIGINTed."""
        if self._cancel is None:
            self._cancel = asyncio.get_running_loop().create_task(self._session._cancel(self))
        return self._cancel

    @property
    def cancel_requested(self) -> bool:
        return self._cancel is not None

    def settle(self, result: SendResult) -> None:
        if not self._done.done():
            self._done.set_result(result)

    def fail(self, exc: BaseException) -> None:
        if not self._done.done():
            self._done.set_exception(exc)


class WorldSession:
    """One terminal in a world, answered here from its mirror."""

    def __init__(
        self,
        link: WorldLink,
        world: str,
        *,
        sid: str,
        pid: int,
        motd: str,
        status: SessionStatus,
        bounds: dict[str, Any],
        screen: bool,
        resumable: bool = False,
    ) -> None:
        self._link = link
        #: A daemon's session survives a lost connection: it waits to be resumed.
        self._resumable = resumable
        self._suspended: str | None = None
        self._guards: list[asyncio.TimerHandle] = []
        #: True when a close should leave the session to its lease instead (a clean
        #: shutdown of a harness whose world says ``persist``).
        self.detach_on_close: Callable[[], bool] = lambda: False
        self.world = world
        self.sid = sid
        self._pid = pid
        self._motd = motd
        self._status = status
        self._max_read = int(bounds.get("maxReadBytes", 256 * 1024))
        self._scrollback = Scrollback(
            max_lines=int(bounds.get("maxLines", 10000)),
            max_bytes=int(bounds.get("maxBytes", 4 * 1024 * 1024)),
        )
        self._screen = screen
        # The latest send (what SEND_ACTIVE is judged by) and every one not yet settled:
        # a send may follow a cancelled one, whose settlement still comes.
        self._op: WorldSendOperation | None = None
        self._ops: dict[str, WorldSendOperation] = {}
        self._last_screen: ScreenRead | None = None
        self._watchers: list[Callable[[], None]] = []
        self._cwd: str | None = None
        self._listening: tuple[Listener, ...] = ()
        self._hidden: str | None = None  # the prompt line the last settlement waits at
        self._closing = False
        self._gone: str | None = None
        link.attach(sid, self)

    # -- facts --------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        """The shell's pid in the world's pid namespace: meaningful only there."""
        return self._pid

    @property
    def status(self) -> SessionStatus:
        return self._status

    @property
    def motd(self) -> str:
        return self._motd

    @property
    def scrollback(self) -> Scrollback:
        return self._scrollback

    @property
    def sending(self) -> bool:
        """A send is running (this harness's, or one an earlier harness left running)."""
        return self._op is not None

    def cwd(self) -> str | None:
        """The shell's directory in the world, as of the last settlement."""
        return self._cwd

    def listening(self) -> tuple[Listener, ...]:
        """Where the session's processes listened at the last settlement."""
        return self._listening

    def hidden_prompt(self) -> str | None:
        """The hidden-input prompt the last settlement proved, while nothing came since.

        The world proves it again right before it writes the secret and refuses
        ``NOT_AT_SECRET_PROMPT`` (writing nothing) when the proof is gone.
        """
        if self._op is not None or self._status.kind == "exited":
            return None
        return self._hidden

    def open_line(self) -> str:
        return self._scrollback.open_line

    def complete_lines_since(self, cursor: int) -> tuple[list[str], int]:
        return self._scrollback.lines_since(cursor)

    def retained_lines(self) -> RetainedLines:
        """The mirror's lines, searched here as the world numbers them."""
        return self._scrollback.retained()

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after every piece of output and once the session has ended."""
        return subscribe(self._watchers, callback)

    def read(self, request: ReadRequest) -> ReadResult:
        bound = (
            self._max_read if request.max_bytes is None else min(self._max_read, request.max_bytes)
        )
        return self._scrollback.read(request.offset, request.count, bound)

    # -- events from the world ---------------------------------------------------------

    def on_event(self, frame: Frame) -> None:
        kind = frame.type
        if kind == "out":
            self._hidden = None
            self._scrollback.append(frame.payload.decode("utf-8", "surrogateescape"))
            self._notify()
        elif kind == "sync":
            header = frame.header
            text = frame.payload.decode("utf-8", "surrogateescape")
            count = int(header.get("lines", 0))
            pieces = text.split("\n")
            lines, open_text = pieces[:count], "\n".join(pieces[count:])
            self._scrollback = Scrollback.from_image(
                ScrollbackImage(
                    first_line=int(header.get("firstLine", 0)),
                    lines=tuple(lines),
                    open_text=open_text,
                    open_active=bool(header.get("openActive")),
                    dropped=bool(header.get("dropped")),
                ),
                max_lines=self._scrollback.max_lines,
                max_bytes=self._scrollback.max_bytes,
            )
            self._notify()
        elif kind == "opout":
            op = self._ops.get(str(frame.header.get("op")))
            if op is not None:
                op.collect(frame.payload.decode("utf-8", "surrogateescape"))
        elif kind == "screen":
            self._keep_screen(frame.header)
        elif kind == "settled":
            self._on_settled(frame.header, frame.payload)
        elif kind == "exit":
            self._status = status_from_wire(frame.header.get("status"))
            self._notify()
        elif kind == "detached":
            reason = frame.header.get("reason") or "detached by the world"
            self._link.detach(self.sid)
            self.end(f"world {self.world!r}: {reason}")

    def _on_settled(self, header: dict[str, Any], collected: bytes = b"") -> None:
        op = self._ops.pop(str(header.get("op")), None)
        if op is None:
            return
        if self._op is op:
            self._op = None
        if collected:  # the send's output since its last ``opout``
            op.collect(collected.decode("utf-8", "surrogateescape"))
        if "error" in header:
            op.fail(error_from_wire(header["error"], self.world))
            return
        result = send_result_from_wire(header.get("result"))
        if isinstance(header.get("cwd"), str):
            self._cwd = header["cwd"]
        if "listeningNow" in header:
            self._listening = listeners_from_wire(header["listeningNow"])
        self._hidden = header.get("hiddenPrompt") if result.input_hidden else None
        if isinstance(header.get("screenNow"), dict):
            self._keep_screen(header["screenNow"])
        self._status = result.session_status
        op.settle(result)

    def link_lost(self, why: str) -> None:
        """The connection ended. A daemon's session waits to be resumed on a new one, its
        sends in flight within their own budgets; any other ends here."""
        if self._resumable and self._gone is None:
            self._suspend(why)
            return
        self.end(why)

    def _suspend(self, why: str) -> None:
        self._suspended = why
        loop = asyncio.get_running_loop()
        for op in list(self._ops.values()):
            delay = max(0.0, op.deadline - loop.time())
            self._guards.append(loop.call_later(delay, self._give_up, op))

    def _give_up(self, op: WorldSendOperation) -> None:
        """The send's budget ran out with the world out of reach: it settles ``timeout``."""
        if self._ops.pop(op.op_id, None) is None:
            return
        if self._op is op:
            self._op = None
        op.settle(
            SendResult(
                viewport=op.read_output(),
                wait_reason=WaitReason.TIMEOUT,
                session_status=self._status,
                truncated=False,
            )
        )

    def resume(self, link: WorldLink, row: dict[str, Any]) -> None:
        """Carry on over ``link``, from an ``adopt`` answer: the mirror resyncs, a send the
        world settled meanwhile settles here, one still running keeps running."""
        for guard in self._guards:
            guard.cancel()
        self._guards.clear()
        self._suspended = None
        self._link = link
        self._status = status_from_wire(row.get("status"))
        link.attach(self.sid, self)
        last = row.get("lastSettled")
        if isinstance(last, dict):
            self._on_settled({"op": last.get("op"), "result": last.get("result")})
        in_flight = row.get("inFlight")
        for op_id in [op_id for op_id in self._ops if op_id != in_flight]:
            self._give_up(self._ops[op_id])

    @property
    def resumable(self) -> bool:
        """Its world is a daemon, which keeps it across a lost connection."""
        return self._resumable

    @property
    def suspended(self) -> str | None:
        """Why the session waits for its world's connection, or None."""
        return self._suspended

    def end(self, why: str) -> None:
        """The world's agent is gone: settle what was in flight, read ``exited`` from now.

        The first reason stands: a daemon that said why it stopped is not overwritten by
        the lost connection that follows.
        """
        if self._gone is not None:
            return
        for guard in self._guards:
            guard.cancel()
        self._guards.clear()
        self._suspended = None
        self._gone = why
        if self._status.kind != "exited":
            self._status = SessionStatus(kind="exited", exit_code=None, signal=None)
        ops, self._ops, self._op = list(self._ops.values()), {}, None
        for op in ops:
            op.settle(
                SendResult(
                    viewport=op.read_output(),
                    wait_reason=WaitReason.SESSION_EXIT,
                    session_status=self._status,
                    truncated=False,
                )
            )
        self._notify()

    def _notify(self) -> None:
        for watcher in tuple(self._watchers):
            watcher()

    # -- what crosses the wire ----------------------------------------------------------

    def _check_live(self) -> None:
        if self._suspended is not None:
            raise TerminalError(
                f"session {self.sid}: world {self.world!r} is out of reach "
                f"({self._suspended}); the harness is reconnecting",
                ErrorCode.WORLD_UNAVAILABLE,
            )
        if self._gone is not None:
            raise TerminalError(
                f"session {self.sid}: {self._gone}; its output stays readable",
                ErrorCode.SESSION_EXITED,
            )

    def adopt_send(self, op_id: str) -> WorldSendOperation:
        """A send a harness before this one started, still running in the world.

        The session is busy with it (``SEND_ACTIVE``) until its settlement arrives.
        """
        op = WorldSendOperation(self, op_id)
        self._op = op
        self._ops[op_id] = op
        op.done.add_done_callback(_retrieve)
        return op

    def start_send(self, request: SendRequest) -> WorldSendOperation:
        self._check_live()
        if self._closing:
            raise TerminalError("the session is being closed", ErrorCode.SESSION_CLOSED)
        previous = self._op
        if previous is not None and not previous.cancel_requested:
            raise TerminalError(
                "a send is still running on this session",
                ErrorCode.SEND_ACTIVE,
                advice="wait for it (terminal_send with no text) or interrupt it",
            )
        op = WorldSendOperation(self, f"o{next(_op_ids)}", request.timeout_ms)
        header: dict[str, Any] = {
            "t": "send",
            "sid": self.sid,
            "op": op.op_id,
            "text": request.text,
            "submit": request.submit,
            "timeoutMs": request.timeout_ms,
            "maxBytes": request.max_bytes,
        }
        if request.keys is not None:
            header["keys"] = list(request.keys)
        if request.wait_for is not None:
            header["waitFor"] = pattern_to_wire(request.wait_for)
        payload = b""
        if request.secret is not None:
            header["secret"] = True
            payload = request.secret.reveal().encode()
        self._op = op
        self._ops[op.op_id] = op
        self._hidden = None
        # No answer but its settlement: a refusal in the world settles it with the error.
        # Written now, not a loop turn later: the send is what the caller waits on, and
        # anything queued before it (a cancel) still goes first, in the same write.
        self._link.send(header, payload, now=True)
        if request.cancel is not None:

            def on_cancel(_reason: BaseException) -> None:
                op.cancel()

            remove = request.cancel.on_cancel(on_cancel)
            op.done.add_done_callback(lambda _done: remove())
        return op

    async def _cancel(self, op: WorldSendOperation) -> None:
        if op.done.done() or self._gone is not None:
            return
        with contextlib.suppress(TerminalError):
            await self._link.call({"t": "cancel", "sid": self.sid, "op": op.op_id})

    async def type_raw(self, text: str) -> None:
        """A person's keys, as typed, written by the world to its terminal (SPEC §22)."""
        self._check_live()
        await self._link.call({"t": "write", "sid": self.sid}, text.encode())

    async def signal(self, sig: str) -> SignalResult:
        self._check_live()
        answer = await self._link.call({"t": "signal", "sid": self.sid, "sig": sig})
        return SignalResult(
            delivered=bool(answer.get("delivered")), target_pgid=int(answer.get("targetPgid", 0))
        )

    def resize(self, rows: int, cols: int) -> TerminalSize:
        """Sent at once; the program sees SIGWINCH one hop later."""
        self._check_live()
        if self._status.kind == "exited":
            raise TerminalError(f"session {self.sid} has ended", ErrorCode.SESSION_EXITED)
        answer = self._link.request({"t": "resize", "sid": self.sid, "rows": rows, "cols": cols})
        answer.add_done_callback(_retrieve)
        return TerminalSize(rows=rows, cols=cols)

    def read_screen(self) -> ScreenRead:
        if not self._screen:
            raise TerminalError(
                f"session {self.sid} is a line-mode session and keeps no screen; "
                "open one with screen=true to see full-screen programs",
                ErrorCode.INVALID_ARGUMENT,
            )
        shown = self._last_screen
        if shown is None:
            raise TerminalError(
                f"session {self.sid}: no screen has arrived from world {self.world!r} yet",
                ErrorCode.UNSUPPORTED,
            )
        return shown

    def _keep_screen(self, wire: dict[str, Any]) -> None:
        shown = wire.get("screen") or {}
        cursor = shown.get("cursor") or [0, 0]
        self._last_screen = ScreenRead(
            screen=ScreenView(
                text=str(shown.get("text", "")),
                cursor=(int(cursor[0]), int(cursor[1])),
                alternate=bool(shown.get("alternate")),
                highlights=highlights_from_wire(shown.get("highlights")),
            ),
            rows=int(wire.get("rows", 0)),
            cols=int(wire.get("cols", 0)),
        )

    async def close(self, reason: str) -> None:
        """Close it in the world (whole tree there); a gone world has nothing left to close."""
        self._closing = True
        try:
            if self._gone is None:
                kind = "detach" if self._resumable and self.detach_on_close() else "close"
                with contextlib.suppress(TerminalError):
                    await self._link.call({"t": kind, "sid": self.sid, "reason": reason})
        finally:
            self._link.detach(self.sid)
            ops, self._ops, self._op = list(self._ops.values()), {}, None
            for op in ops:
                op.fail(TerminalError("the session was closed", ErrorCode.SESSION_CLOSED))
