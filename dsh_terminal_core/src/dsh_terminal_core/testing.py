"""In-memory terminal backend for tests of the registry and of layers built on it.

:class:`FakeBackend` implements :class:`~dsh_terminal_core.terminals.TerminalBackend`
without processes, so tests can stage what real PTYs cannot on demand: a spawn that is
still in flight, a spawn or close that fails, a send that settles only when told.

It keeps the real contracts where callers rely on them: one send at a time
(``SEND_ACTIVE``), cancellation through the spawn context re-raises the caller's reason,
a close that fails leaves the session open so a later close retries, and a close settles
an active send as ``session_exit``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from .kernel.cancel import Cancellation
from .kernel.errors import BackendCleanupError, TerminalError
from .registry.types import (
    BackendSpawnContext,
    ReadRequest,
    ReadResult,
    ScreenRead,
    SendRequest,
    SendResult,
    SessionStatus,
    SignalResult,
    TerminalSize,
    WaitReason,
)

__all__ = ["FakeBackend", "FakeSendOperation", "FakeSession"]


class FakeSendOperation:
    """A send that collects :meth:`FakeSession.emit` output until :meth:`settle` is called."""

    def __init__(self, session: FakeSession, request: SendRequest) -> None:
        self.session = session
        self.request = request
        self.cancelled = False
        self._collected: list[str] = []
        self._cursor = 0
        self._done: asyncio.Future[SendResult] = asyncio.get_running_loop().create_future()

    @property
    def done(self) -> asyncio.Future[SendResult]:
        return self._done

    def result(self) -> asyncio.Future[SendResult]:
        """The result; cancelling the await leaves the send alone."""
        return asyncio.shield(self._done)

    def read_output(self) -> str:
        """Return what was collected since the previous call."""
        fresh = "".join(self._collected[self._cursor :])
        self._cursor = len(self._collected)
        return fresh

    async def cancel(self) -> None:
        """Record the interrupt and settle the way a shell does after SIGINT (``$?`` 130)."""
        self.cancelled = True
        self.settle(exit_code=130)

    def settle(
        self,
        wait_reason: WaitReason = WaitReason.STDIN_READ,
        *,
        exit_code: int | None = 0,
        input_hidden: bool = False,
    ) -> None:
        """Finish the send with what it collected; later calls are ignored."""
        if self._done.done():
            return
        self._done.set_result(
            SendResult(
                viewport="".join(self._collected),
                wait_reason=wait_reason,
                session_status=self.session.status,
                truncated=False,
                exit_code=exit_code if wait_reason is WaitReason.STDIN_READ else None,
                input_hidden=input_hidden,
            )
        )


class FakeSession:
    """One fake terminal: output is a list of lines, signals and closes are recorded."""

    def __init__(self, context: BackendSpawnContext, pid: int, motd: str = "") -> None:
        self.context = context
        self.lines: list[str] = []
        self.sends: list[FakeSendOperation] = []
        self.signals: list[str] = []
        self.close_reasons: list[str] = []
        self.closed = False
        # When set, close waits for it: lets a test hold a close in flight.
        self.close_gate: asyncio.Event | None = None
        self._pid = pid
        self._motd = motd
        self._status = SessionStatus.running()
        self._close_failures: list[BaseException] = []
        self.size = TerminalSize(rows=context.rows or 40, cols=context.cols or 160)

    @property
    def session_id(self) -> str:
        return self.context.session_id

    @property
    def pid(self) -> int:
        return self._pid

    @property
    def status(self) -> SessionStatus:
        return self._status

    @property
    def motd(self) -> str:
        return self._motd

    def cwd(self) -> str | None:
        return self.context.cwd

    @property
    def active_send(self) -> FakeSendOperation | None:
        if self.sends and not self.sends[-1].done.done():
            return self.sends[-1]
        return None

    def emit(self, text: str) -> None:
        """Append output: to the scrollback as lines, and to the active send if any."""
        self.lines.extend(text.splitlines())
        if (op := self.active_send) is not None:
            op._collected.append(text)

    def fail_next_close(self, error: BaseException | None = None) -> None:
        """Make the next close raise ``error`` (default a :class:`BackendCleanupError`)."""
        self._close_failures.append(
            error
            if error is not None
            else BackendCleanupError(f"{self.session_id}: processes survived (injected)")
        )

    def start_send(self, request: SendRequest) -> FakeSendOperation:
        if self.closed:
            raise TerminalError(f"terminal session {self.session_id} is closed", "NO_SESSION")
        if self.active_send is not None:
            raise TerminalError(
                f"terminal session {self.session_id} is busy with another send", "SEND_ACTIVE"
            )
        op = FakeSendOperation(self, request)
        self.sends.append(op)
        return op

    def read(self, request: ReadRequest) -> ReadResult:
        first = request.offset - 1  # lines are numbered from 1
        page = self.lines[first : first + request.count]
        end = first + len(page)
        return ReadResult(
            text="\n".join(page),
            total_lines=len(self.lines),
            line_begin=request.offset,
            line_end=end,
            truncated=end < len(self.lines),
        )

    async def signal(self, sig: str) -> SignalResult:
        if self.closed:
            raise TerminalError(f"terminal session {self.session_id} is closed", "NO_SESSION")
        self.signals.append(sig)
        return SignalResult(delivered=True, target_pgid=self._pid)

    def resize(self, rows: int, cols: int) -> TerminalSize:
        self.size = TerminalSize(rows=rows, cols=cols)
        return self.size

    def read_screen(self) -> ScreenRead:
        raise TerminalError(
            f"terminal session {self.session_id} keeps no screen", "INVALID_ARGUMENT"
        )

    async def close(self, reason: str) -> None:
        """Close once; an injected failure leaves the session open for a retry."""
        self.close_reasons.append(reason)
        if self.closed:
            return
        if self.close_gate is not None:
            await self.close_gate.wait()
        if self._close_failures:
            raise self._close_failures.pop(0)
        self.closed = True
        self._status = SessionStatus(kind="exited", signal="SIGTERM")
        if (op := self.active_send) is not None:
            op.settle(WaitReason.SESSION_EXIT)


class FakeBackend:
    """A :class:`TerminalBackend` of a configurable ``type`` that makes :class:`FakeSession`\\ s.

    ``hold()`` keeps new spawns in flight until ``release()``; while held, a spawn whose
    context is cancelled closes its half-made session and raises the reason, unless
    ``honor_cancel`` is False (then it finishes regardless, as a slow backend might).
    ``on_spawned`` runs synchronously just before a spawn returns its session.
    ``sessions`` lists the sessions handed out, ``aborted`` those the backend closed itself
    because their spawn was cancelled, ``contexts`` every spawn context received.
    """

    def __init__(self, type: str = "fake", *, honor_cancel: bool = True, motd: str = "") -> None:
        self._type = type
        self.honor_cancel = honor_cancel
        self.motd = motd
        self.sessions: list[FakeSession] = []
        self.contexts: list[BackendSpawnContext] = []
        self.aborted: list[FakeSession] = []
        self.on_spawned: Callable[[FakeSession], None] | None = None
        self._held = False
        self._waiters: set[asyncio.Event] = set()
        self._arrivals = asyncio.Event()
        self._spawn_failures: list[BaseException] = []
        self._pids = itertools.count(4000)

    @property
    def type(self) -> str:
        return self._type

    @property
    def exports_env(self) -> bool:
        """A fake terminal runs no shell, so it never takes ``export`` lines."""
        return False

    @property
    def in_flight(self) -> int:
        """How many spawns are waiting at the hold."""
        return len(self._waiters)

    def hold(self) -> None:
        """Keep spawns that start from now on in flight until :meth:`release`."""
        self._held = True

    def release(self) -> None:
        """Let every held spawn finish and stop holding new ones."""
        self._held = False
        for waiter in self._waiters:
            waiter.set()

    def fail_next_spawn(self, error: BaseException) -> None:
        """Make the next spawn raise ``error`` instead of creating a session."""
        self._spawn_failures.append(error)

    async def wait_in_flight(self, count: int = 1) -> None:
        """Wait until at least ``count`` spawns are waiting at the hold."""
        while len(self._waiters) < count:
            self._arrivals.clear()
            await self._arrivals.wait()

    async def spawn(self, context: BackendSpawnContext) -> FakeSession:
        self.contexts.append(context)
        context.cancel.raise_if_cancelled()
        if self._spawn_failures:
            raise self._spawn_failures.pop(0)
        session = FakeSession(context, pid=next(self._pids), motd=self.motd)
        await self._pass_hold(context.cancel)
        if self.honor_cancel and context.cancel.reason is not None:
            self.aborted.append(session)
            await session.close("spawn cancelled")
            raise context.cancel.reason
        self.sessions.append(session)
        if self.on_spawned is not None:
            self.on_spawned(session)
        return session

    async def _pass_hold(self, cancel: Cancellation) -> None:
        if not self._held:
            return
        wake = asyncio.Event()
        self._waiters.add(wake)
        self._arrivals.set()
        remove = cancel.on_cancel(lambda _reason: wake.set()) if self.honor_cancel else None
        try:
            while self._held and not (self.honor_cancel and cancel.cancelled):
                wake.clear()
                await wake.wait()
        finally:
            self._waiters.discard(wake)
            if remove is not None:
                remove()
