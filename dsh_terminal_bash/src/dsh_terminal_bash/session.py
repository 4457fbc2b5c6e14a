"""A live bash session: prompt protocol, readiness, scrollback, send/cancel/close."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import attrs

from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import OperationCancelled, TerminalError
from dsh_terminal_core.kernel.subscribe import subscribe
from dsh_terminal_core.provider import ExitStatus, Foreground, TerminalProcess
from dsh_terminal_core.registry import (
    ReadRequest,
    ReadResult,
    RetainedLines,
    ScreenRead,
    SendRequest,
    SendResult,
    SessionStatus,
    SignalResult,
    TerminalSize,
    WaitReason,
)
from dsh_terminal_core.registry.linematch import LineMatch, LineMatcher
from dsh_terminal_core.registry.overstrike import render
from dsh_terminal_core.registry.scrollback import Scrollback

from .config import BashConfig
from .echo import echoed_by, without_echo
from .environment import BASH, PROMPT
from .exitstatus import TAIL_BYTES, unfolded
from .interrupts import CancelEnforcement
from .keys import encode_keys
from .modes import ModeTracker
from .operation import BashSendOperation
from .probe import NO_SOCKETS, SessionProbe
from .queries import LineQueries, Replies
from .readiness import Readiness, Settlement
from .sanitizer import Chunk, Sanitizer
from .screen import ScreenEmulator
from .shell import OutputFilter, ShellPolicy

__all__ = ["SECRET_SHOWN", "BashSession", "StartupFailed"]

SECRET_SHOWN = "[secret]"
"""What output shows in place of a secret the send in progress typed."""

# How long a send that follows a cancelled one waits for it to settle. An interrupted
# command stops and the prompt returns within milliseconds; a program that ignores
# SIGINT keeps the session, and the follower is refused rather than kept waiting.
_FOLLOW_CANCEL_S = 2.0


class StartupFailed(TerminalError):
    """The shell exited or never became ready before its first prompt."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "SPAWN_FAILED")


class BashSession(SessionProbe, CancelEnforcement):
    """One bash process on a PTY, driven through the controlled prompt protocol.

    What the readiness ladder may ask about the terminal, and the listening sockets, are
    :class:`SessionProbe` (``probe.py``); keeping a cancel in force and the timing of a
    SIGINT to the shell are :class:`CancelEnforcement` (``interrupts.py``).
    """

    def __init__(
        self,
        process: TerminalProcess,
        config: BashConfig,
        session_id: str,
        *,
        screen: ScreenEmulator | None = None,
        signals_folded: bool = False,
        size: tuple[int, int] | None = None,
        shell: ShellPolicy = BASH,
    ) -> None:
        """``signals_folded``: the process's exit status reports a death by signal n as
        exit status 128+n (the shell runs under bubblewrap), so the session tells a
        death from an ``exit`` by the shell's exit marker (``EXIT_MARKER_PREFIX``).
        ``shell``: the shell program's own part (continuation prompts, output filter)."""
        self._process = process
        self._shell = shell
        self._signals_folded = signals_folded
        # The two latest pieces of output, kept by reference: the exit marker is the last
        # thing an exiting shell prints, and may straddle two reads.
        self._last_output = b""
        self._output_before = b""
        self._config = config
        self.session_id = session_id
        self._sanitizer = Sanitizer(max_escape_bytes=config.max_read_bytes)
        self._scrollback = Scrollback(
            max_lines=config.scrollback_lines, max_bytes=config.scrollback_max_bytes
        )
        self._status = SessionStatus.running()
        self._shell_pgid: int | None = None
        self._readiness: Readiness | None = None
        self._op: BashSendOperation | None = None
        # The secret the send in progress typed: a program that prints it anyway shows
        # [secret] in every output (scrollback, results, searches), as in a recording.
        self._typed_secret: str | None = None
        self._closing = False
        self._close_task: asyncio.Task[None] | None = None
        self._enforcers: set[asyncio.Task[None]] = set()
        # Sends following a cancelled one, woken when it releases the session.
        self._free_waiters: list[asyncio.Future[None]] = []
        self._markers = 0  # prompt markers seen so far
        # A SIGINT went to a protocol shell itself since the last send typed anything
        # (a prompt after it does not prove it was taken: it may answer an earlier one).
        self._interrupt_unanswered = False
        self._marker_event = asyncio.Event()
        self._shell_exe: tuple[int, int] | None = None
        # The last look that found a single-threaded foreground leader reading (the
        # shell at its prompt, a REPL), with that leader's run stamp.
        self._wait_seen: Foreground | None = None
        self._motd = ""
        self._startup_text: list[str] = []
        # Modes decide what a named key sends, in every session; a screen session also
        # keeps the emulated screen.
        self._modes = ModeTracker()
        self._screen = screen
        # A line session answers cursor-position and device-attribute queries itself; a
        # screen session's emulator answers every query.
        rows, cols = size if size is not None else (config.rows, config.cols)
        self._queries = LineQueries(rows, cols)
        # What the shell's line editor draws of its own goes before the text is read.
        self._filter: OutputFilter | None = (
            shell.output_filter(cols) if shell.output_filter is not None else None
        )
        self._replies = Replies(process)
        self._exact = process.exact_input_probe
        self._watchers: list[Callable[[], None]] = []
        # Sockets of the session's processes already listening when the latest send's
        # input was written: a result reports only the ones that came after.
        self._listening_before: frozenset[int] = NO_SOCKETS
        # The shell's run stamp from the look before a check that found it childless: while
        # the shell has not run since, it still has no child (only it forks its children).
        self._childless_stamp: bytes | None = None
        self._stamped_before: Foreground | None = None
        process.set_output_handler(self._on_output)
        process.done.add_done_callback(self._on_exit)

    # -- facts ------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def shell_pid(self) -> int | None:
        """Bash's own pid (its process group leader); under bwrap not the PTY child."""
        return self._shell_pgid

    @property
    def status(self) -> SessionStatus:
        return self._status

    @property
    def motd(self) -> str:
        return self._motd

    def add_notice(self, text: str) -> None:
        """Put a line from the harness (the login environment not applied) before what
        the shell printed at startup, where the first open's result shows it."""
        self._motd = f"{text}\n{self._motd}" if self._motd else text

    def cwd(self) -> str | None:
        pid = self._shell_pgid or self._process.pid
        try:
            return os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return None

    # -- output -----------------------------------------------------------------------

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after every piece of output and once the session has ended.

        This is what lets a reader wait for a line without polling. The callback runs
        synchronously on the event loop, after the text is in the scrollback and after
        the status says ``exited``; it must not raise and should only wake a waiter.
        Returns a function that removes the callback (harmless to call twice).
        """
        return subscribe(self._watchers, callback)

    def open_line(self) -> str:
        """The line still being written, e.g. a password prompt waiting for its answer."""
        return self._scrollback.open_line

    def _notify(self) -> None:
        if self._watchers:
            for callback in list(self._watchers):
                callback()

    def _on_output(self, data: bytes) -> None:
        self._output_before, self._last_output = self._last_output, data
        self._modes.feed(data)
        screen = self._screen
        replies = screen.feed(data) if screen is not None else self._queries.feed(data)
        if replies:
            self._replies.answer(replies, self._shell_pgid)
        if self._filter is not None:
            data = self._filter(data)
        self._consume(self._sanitizer.feed(data))

    def _consume(self, chunk: Chunk) -> None:
        text = chunk.text
        secret = self._typed_secret
        if secret is not None and secret in text:
            text = text.replace(secret, SECRET_SHOWN)
        markers = chunk.markers
        if markers:
            self._markers += len(markers)
            self._marker_event.set()
        match: LineMatch | None = None
        if text:
            completed = self._scrollback.append(text)
            op = self._op
            if op is not None:
                if op.matcher is not None and op.collecting:
                    match = self._feed_matcher(op, op.matcher, text)
                else:
                    op.append(text, completed)
            elif self._readiness is not None:
                self._startup_text.append(text)
        readiness = self._readiness
        if match is not None and readiness is not None and not readiness.settled:
            readiness.on_match(match)
        if readiness is not None and not readiness.settled:
            readiness.on_output(
                bool(text),
                bool(markers),
                markers[-1].exit_code if markers else None,
                self._sanitizer.prompt_tail,
            )
        if text and self._watchers:
            self._notify()

    def _feed_matcher(
        self, op: BashSendOperation, matcher: LineMatcher, text: str
    ) -> LineMatch | None:
        """Collect ``text`` for ``op`` up to the end of a line matching its ``wait_for``;
        that line, once one matched.

        Output after the matching line (in the same piece) goes to the scrollback only:
        the result, and a background job's output, end with that line.
        """
        end = matcher.feed(text, op.viewport.first_line)
        if end is None:
            op.append(text)
            return None
        op.append(text[:end])
        return matcher.matched

    def _on_exit(self, done: asyncio.Future[ExitStatus]) -> None:
        self._consume(self._sanitizer.flush())
        if done.cancelled() or done.exception() is not None:
            self._status = SessionStatus(kind="exited", exit_code=None, signal=None)
        else:
            status = done.result()
            code, signal_name = status.exit_code, status.signal
            if self._signals_folded and code is not None:
                tail = self._output_before[-TAIL_BYTES:] + self._last_output
                code, signal_name = unfolded(code, tail[-TAIL_BYTES:])
            self._status = SessionStatus(kind="exited", exit_code=code, signal=signal_name)
        if self._readiness is not None:
            self._readiness.on_exit()
        self._notify()

    # -- startup ----------------------------------------------------------------------

    async def start(self, cancel: Cancellation) -> None:
        """Wait for the first prompt through the ladder; learn the shell's process group.

        Exit or timeout during startup closes the half-made shell and raises
        :class:`StartupFailed`; cancellation closes it and re-raises the caller's reason.
        """
        loop = asyncio.get_running_loop()
        settled: asyncio.Future[Settlement] = loop.create_future()
        self._readiness = Readiness(
            config=self._config,
            probe=self,
            prompt=PROMPT,
            on_settle=lambda s: _resolve(settled, s),
            startup=True,
        )
        self._readiness.start()
        remove = cancel.on_cancel(lambda _reason: _abort(settled))
        try:
            settlement = await settled
        except asyncio.CancelledError:
            self._readiness.stop()
            await self._abandon()
            if cancel.reason is not None:
                raise cancel.reason from None
            raise
        finally:
            remove()
        self._readiness = None
        if settlement.reason is WaitReason.SESSION_EXIT:
            await self._abandon()
            output = "".join(self._startup_text).strip()
            detail = f": {output[-500:]}" if output else ""
            raise StartupFailed(
                f"the shell exited during startup ({self._describe_exit()}){detail}"
            )
        if settlement.reason is WaitReason.TIMEOUT:
            await self._abandon()
            raise StartupFailed(
                f"the shell did not reach its first prompt within {self._config.timeout_ms} ms"
            )
        self._shell_pgid = self._process.foreground_pgid()
        if self._shell_pgid is not None:
            self._process.set_shell_process_group(self._shell_pgid)
            self._shell_exe = self._process.executable_id(self._shell_pgid)
        text = "".join(self._startup_text)
        self._startup_text = []
        self._motd = render(_without_prompt(text, settlement)).strip("\n")

    async def _abandon(self) -> None:
        with contextlib.suppress(Exception):
            await self._process.terminate()

    def _describe_exit(self) -> str:
        if self._status.signal:
            return f"killed by {self._status.signal}"
        return f"exit code {self._status.exit_code}"

    # -- send -------------------------------------------------------------------------

    def start_send(self, request: SendRequest) -> BashSendOperation:
        """Reserve the session and start writing; the result comes through ``op.done``.

        ``keys`` are encoded for the terminal's modes when the send starts (before the
        reservation, so a misspelled key refuses the whole send and types nothing).

        A send that arrives while the previous one is being cancelled (its Ctrl-C is
        out, the send has not settled yet) follows it instead of being refused: it
        starts the moment that send has settled and released the session. It is
        refused with ``SEND_ACTIVE`` only if the interrupted program has not stopped
        within ``_FOLLOW_CANCEL_S`` (one that ignores SIGINT); that refusal, and any
        other of a following send, comes through ``op.done``.
        """
        previous = self._op
        if previous is not None and previous.cancel_task is not None and not self._closing:
            return self._follow(previous, request)
        op = self._new_op(request)
        self._begin(op, request)
        return op

    def _new_op(self, request: SendRequest) -> BashSendOperation:
        op = BashSendOperation(_bounded(self._config.max_read_bytes, request.max_bytes), self)
        if request.wait_for is not None:
            typed = request.text.split("\n") if request.text and request.keys is None else ()
            op.matcher = LineMatcher(
                request.wait_for, echoes=typed, prompts=(PROMPT, *self._shell.continuation_prompts)
            )
        return op

    def _begin(self, op: BashSendOperation, request: SendRequest) -> None:
        """Check ``request``, reserve the session for ``op`` and start writing.

        Raises:
            TerminalError: the session is busy or closing, or the request is refused;
                nothing was reserved or typed.
        """
        if request.keys is not None:
            request = attrs.evolve(
                request, text=encode_keys(request.keys, self._modes.modes), submit=False
            )
        if self._op is not None:
            raise TerminalError(
                f"session {self.session_id} is still busy with a previous send; wait for it, "
                "or interrupt it with terminal_signal",
                "SEND_ACTIVE",
            )
        if self._closing:
            raise TerminalError(f"session {self.session_id} is closing", "SESSION_CLOSED")
        if request.secret is not None and self._hidden_prompt_now() is None:
            raise _not_at_secret_prompt(self.session_id)
        timeout = request.timeout_ms
        if timeout is not None and not 1 <= timeout <= self._config.max_timeout_ms:
            raise TerminalError(
                f"timeoutMs must be from 1 to {self._config.max_timeout_ms}, got {timeout}",
                "INVALID_ARGUMENT",
            )
        waiting = request.text == "" and not request.submit
        op.collecting = waiting  # a send that types collects once the write fence passed
        op.viewport.first_line = self._scrollback.open_line_number  # where this output starts
        op.viewport.lines = self._scrollback
        if self._status.kind == "exited":
            op.settle(self._result(op, Settlement(reason=WaitReason.SESSION_EXIT), request))
            return
        # Waiting without input has no earlier wait to tell apart from a new one: a
        # program already blocked reading has settled.
        before = self._foreground_before_write() if self._exact and not waiting else None
        # What the screen showed before this send is not news for its result.
        self._modes.entered_alternate = False
        if self._screen is not None:
            self._screen.take_drawn()
        self._op = op
        readiness = Readiness(
            config=self._config,
            probe=self,
            prompt=PROMPT,
            on_settle=_SettleSend(self, op, request),
            before=before,
            fenced=not waiting,
            timeout_ms=timeout,
        )
        self._readiness = readiness
        if request.cancel is not None and op.forget_cancel is None:
            op.forget_cancel = request.cancel.on_cancel(op.cancel_unsettled)
        try:
            if waiting:
                showing = bool(self._markers) and self._sanitizer.prompt_tail == PROMPT
                readiness.on_wait_start(showing, self._sanitizer.last_marker_exit_code)
            elif self._must_wait_to_type() and request.secret is None and _types(request):
                op.write_task = asyncio.get_running_loop().create_task(self._write(op, request))
            else:
                self._write_at_once(op, request, before)
        finally:
            # Armed whatever happened above: the deadline is what ends a send that
            # failed after it reserved the session.
            readiness.start()

    def _follow(self, previous: BashSendOperation, request: SendRequest) -> BashSendOperation:
        """A send that starts once the cancelled ``previous`` has released the session.

        Until then it has typed nothing: cancelling it (its token, or ``op.cancel()``)
        ends it with ``CANCELLED`` and signals nothing.
        """
        op = self._new_op(request)
        if request.cancel is not None:
            op.forget_cancel = request.cancel.on_cancel(op.cancel_unsettled)
        # Held as the write task, so a cancel of this send stops the wait first.
        op.write_task = asyncio.get_running_loop().create_task(
            self._begin_behind(previous, op, request)
        )
        return op

    async def _begin_behind(
        self, previous: BashSendOperation, op: BashSendOperation, request: SendRequest
    ) -> None:
        free: asyncio.Future[None] | None = None
        try:
            if self._op is previous:
                free = asyncio.get_running_loop().create_future()
                self._free_waiters.append(free)
                try:
                    await asyncio.wait_for(free, _FOLLOW_CANCEL_S)
                except TimeoutError:
                    op.fail(
                        TerminalError(
                            f"session {self.session_id} is still busy with a send that was "
                            f"cancelled: its program has not stopped {_FOLLOW_CANCEL_S:g} s "
                            "after Ctrl-C; interrupt it with terminal_signal (SIGTERM, "
                            "SIGKILL); nothing was sent",
                            "SEND_ACTIVE",
                        )
                    )
                    return
            self._begin(op, request)
        except asyncio.CancelledError:
            op.fail(OperationCancelled("cancelled before it was typed; nothing was sent"))
            # Its caller has stopped waiting; nobody may be left to read the outcome.
            op.done.exception()
        except Exception as exc:  # refused at its start, as start_send would have raised
            op.fail(exc)
        finally:
            if free is not None and free in self._free_waiters:
                self._free_waiters.remove(free)

    def _release(self, op: BashSendOperation) -> None:
        """End ``op``'s reservation (if it holds it) and start a send that follows it."""
        if self._op is not op:
            return
        self._op = None
        self._typed_secret = None
        waiters, self._free_waiters = self._free_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _write_at_once(
        self, op: BashSendOperation, request: SendRequest, before: Foreground | None
    ) -> None:
        """Write the input inside ``start_send`` when the terminal takes it whole.

        That spares the loop turn a writing task costs on every send; what the terminal
        does not take at once is written by a task. ``before`` was looked at in this same
        step, so it still describes the moment before the write.
        """
        payload = self._begin_write(op, request, before)
        if payload is None:
            return
        try:
            written = self._process.write_now(payload)
        except Exception:  # a dead terminal settles through session_exit
            written = len(payload)
        if written < len(payload):
            rest = payload[written:]
            op.write_task = asyncio.get_running_loop().create_task(self._write_rest(op, rest))
            return
        self._write_finished(op)

    async def _write(self, op: BashSendOperation, request: SendRequest) -> None:
        # A cancel still in force (a line it cut short may still sit in the shell's line
        # editor) finishes before this input is typed behind that line.
        unfinished = {task for task in self._enforcers if not task.done()}
        if unfinished:
            await asyncio.wait(unfinished)
        if self._interrupt_unanswered and _types(request) and not op.input_cancelled:
            await self._answer_held_interrupt()
        payload = self._begin_write(op, request)
        if payload is not None:
            await self._write_rest(op, payload)

    def _begin_write(
        self, op: BashSendOperation, request: SendRequest, before: Foreground | None = None
    ) -> bytes | None:
        """Fence the write and return the bytes to type; None when a secret was refused.

        ``before``: a look at the foreground taken before the write and after anything
        else this send waited for (see :meth:`Readiness.on_write_start`).
        """
        secret = request.secret
        payload = request.text + ("\r" if request.submit else "")
        # The write fence: output the terminal already holds (a prompt printed late after
        # an interrupt, a timeout or a cancel) was produced before this input and goes to
        # the scrollback only, never to this send's viewport or its readiness.
        self._process.drain_output()
        if secret is not None:
            # Proven again right before the write: the prompt may have gone since the send
            # was accepted. The secret is written raw, never through text handling.
            if op.input_cancelled or self._hidden_prompt_now() is None:
                self._refuse_secret(op)
                return None
            payload = secret.reveal() + "\r"
            self._typed_secret = secret.reveal()
        op.collecting = not op.done.done()
        op.viewport.first_line = self._scrollback.open_line_number  # where this output starts
        op.viewport.lines = self._scrollback
        # Judged on the modes now, one TCGETS: a look taken earlier in the send may
        # describe a remembered wait rather than the terminal as the input meets it.
        op.echoed = secret is None and echoed_by(self._process.terminal_modes())
        readiness = self._readiness
        if readiness is not None and self._op is op:
            readiness.on_write_start(before)
        if (
            before is not None
            and before is self._stamped_before
            and before.leader_stamp is not None
            and before.leader_stamp == self._childless_stamp
        ):
            # The shell was seen childless after this very look, and has not run since.
            self._listening_before = NO_SOCKETS
        else:
            listening = self.listening()
            self._listening_before = (
                frozenset(found.inode for found in listening) if listening else NO_SOCKETS
            )
        return payload.encode("utf-8") if not op.input_cancelled else b""

    async def _write_rest(self, op: BashSendOperation, payload: bytes) -> None:
        try:
            if payload and not op.input_cancelled:
                await self._process.write(payload)
        except asyncio.CancelledError:
            pass  # a cancelled send drops its unwritten remainder on purpose
        except Exception:  # a dead terminal settles through session_exit
            pass
        self._write_finished(op)

    def _refuse_secret(self, op: BashSendOperation) -> None:
        """End a secret send that wrote nothing: the prompt was gone at the moment of writing."""
        readiness = self._readiness
        if readiness is not None and self._op is op:
            readiness.stop()
            self._readiness = None
        op.fail(_not_at_secret_prompt(self.session_id))
        self._release(op)

    def _write_finished(self, op: BashSendOperation) -> None:
        """Written, dropped or failed: no more input is coming, so readiness may judge.

        Idempotent. Also reached from a cancel whose write task never got to run.
        """
        if not op.done.done():
            op.collecting = True
        # The stdin-wait tier may look from now on (an interrupted REPL line still
        # settles on the REPL's read), and markers count as evidence.
        readiness = self._readiness
        if readiness is not None and self._op is op:
            readiness.on_write_done()

    def _settle(self, op: BashSendOperation, settlement: Settlement, request: SendRequest) -> None:
        op.settle(self._result(op, settlement, request))
        if self._readiness is not None and self._readiness.settled:
            self._readiness = None
        self._release_when_quiet(op)

    def _release_when_quiet(self, op: BashSendOperation) -> None:
        """Release the reservation once the send settled and any cancel finished signalling."""
        task = op.cancel_task
        if task is not None and not task.done():
            task.add_done_callback(lambda _t: self._release_when_quiet(op))
            return
        self._release(op)

    def _result(
        self, op: BashSendOperation, settlement: Settlement, request: SendRequest
    ) -> SendResult:
        text = op.viewport.text()
        if settlement.by_prompt and text.endswith(PROMPT):
            text = text[: -len(PROMPT)]
        if op.echoed:
            text = without_echo(text, request.text, request.submit, self._config.cols)
        screen = None
        if self._screen is not None and (self._screen.take_drawn() or self._screen.alternate):
            # The program drew a screen: show it instead of the stream of escapes.
            screen = self._screen.snapshot()
        return SendResult(
            viewport="" if screen is not None else text,
            wait_reason=settlement.reason,
            session_status=self._status,
            truncated=False if screen is not None else op.viewport.truncated,
            exit_code=settlement.exit_code if settlement.by_prompt else None,
            input_hidden=settlement.input_hidden,
            screen=screen,
            alternate_screen=self._screen is None and self._modes.alternate_screen,
            match=settlement.match,
            listening=self._new_listeners(),
            periodic=settlement.periodic,
        )

    async def type_raw(self, text: str) -> None:
        """Write a person's keys to the terminal as they are (SPEC §22): no readiness, no
        echo handling, nothing settles. The registry allows it only while a person holds
        control, when no send of the agent is in flight.
        """
        if self._closing or self._status.kind == "exited":
            raise TerminalError(f"session {self.session_id} has ended", "SESSION_EXITED")
        if text:
            await self._process.write(text.encode("utf-8"))

    # -- read, signal, close ----------------------------------------------------------

    def read(self, request: ReadRequest) -> ReadResult:
        return self._scrollback.read(
            request.offset, request.count, _bounded(self._config.max_read_bytes, request.max_bytes)
        )

    def read_screen(self) -> ScreenRead:
        if self._screen is None:
            raise TerminalError(
                f"session {self.session_id} is a line-mode session and keeps no screen; "
                "open one with screen=true to see full-screen programs",
                "INVALID_ARGUMENT",
            )
        return ScreenRead(
            screen=self._screen.snapshot(), rows=self._screen.rows, cols=self._screen.cols
        )

    def resize(self, rows: int, cols: int) -> TerminalSize:
        if self._closing or self._status.kind == "exited":
            raise TerminalError(f"session {self.session_id} has ended", "SESSION_EXITED")
        if self._screen is not None:
            self._screen.resize(rows, cols)
        self._queries.resize(rows, cols)
        if self._shell.output_filter is not None:
            self._filter = self._shell.output_filter(cols)
        self._process.resize(rows, cols)
        return TerminalSize(rows=rows, cols=cols)

    @property
    def scrollback(self) -> Scrollback:
        return self._scrollback

    @property
    def max_read_bytes(self) -> int:
        """The most a read or a send's viewport returns (a world's mirror reads the same)."""
        return self._config.max_read_bytes

    def complete_lines_since(self, cursor: int) -> tuple[list[str], int]:
        """Complete lines numbered ``>= cursor`` and the next cursor (a tail that never resends)."""
        return self._scrollback.lines_since(cursor)

    def retained_lines(self) -> RetainedLines:
        """A snapshot of the scrollback's lines for a search (:class:`SearchableSession`)."""
        return self._scrollback.retained()

    async def signal(self, sig: str) -> SignalResult:
        if self._closing:
            raise TerminalError(f"session {self.session_id} is closing", "SESSION_CLOSED")
        if self._status.kind == "exited":
            raise TerminalError(f"session {self.session_id} has exited", "SESSION_EXITED")
        if sig == "SIGINT" and self._exact:
            await self._until_shell_reads()
        pgid = self._process.signal_foreground(sig)
        if sig == "SIGINT" and self._prompt_shell(pgid) is not None:
            self._interrupt_unanswered = True
        return SignalResult(delivered=True, target_pgid=pgid)

    async def close(self, reason: str) -> None:
        """Stop readiness, tear the process tree down, settle an active send as session_exit.

        Raises when teardown leaves survivors; a later call retries.
        """
        self._closing = True
        for enforcer in list(self._enforcers):
            enforcer.cancel()
        # Output produced by the teardown itself (a prompt after the TERM) must not settle
        # the active send as if the command had finished.
        if self._readiness is not None:
            self._readiness.stop()
        await self._process.terminate()
        if self._status.kind == "running":
            # The exit callback may not have run yet; the process is gone either way.
            self._status = SessionStatus(kind="exited", exit_code=None, signal="SIGKILL")
            self._notify()
        op = self._op
        if op is not None and not op.done.done():
            op.settle(
                SendResult(
                    viewport=op.viewport.text(),
                    wait_reason=WaitReason.SESSION_EXIT,
                    session_status=self._status,
                    truncated=op.viewport.truncated,
                )
            )
        if op is not None:
            self._release(op)


def _not_at_secret_prompt(session_id: str) -> TerminalError:
    return TerminalError(
        f"session {session_id} is not waiting at a hidden-input (password) prompt; nothing "
        "was sent. Send the command that asks for the secret first, and send the secret "
        "once the result says inputHidden=true",
        "NOT_AT_SECRET_PROMPT",
    )


def _types(request: SendRequest) -> bool:
    """The send types something (an empty line counts)."""
    return bool(request.text) or request.submit


def _resolve(future: asyncio.Future[Settlement], settlement: Settlement) -> None:
    if not future.done():
        future.set_result(settlement)


def _abort(future: asyncio.Future[Settlement]) -> None:
    if not future.done():
        future.cancel()


class _SettleSend:
    """A send's ``on_settle``: one object where a closure over the session, the send and
    its request was five, traversed by every garbage collection while the send is in
    flight."""

    __slots__ = ("_op", "_request", "_session")

    def __init__(self, session: BashSession, op: BashSendOperation, request: SendRequest) -> None:
        self._session = session
        self._op = op
        self._request = request

    def __call__(self, settlement: Settlement) -> None:
        self._session._settle(self._op, settlement, self._request)


def _without_prompt(text: str, settlement: Settlement) -> str:
    if settlement.by_prompt and text.endswith(PROMPT):
        return text[: -len(PROMPT)]
    return text


def _bounded(own: int, requested: int | None) -> int:
    """The caller's byte bound when it is tighter than the backend's own."""
    return own if requested is None else min(own, requested)
