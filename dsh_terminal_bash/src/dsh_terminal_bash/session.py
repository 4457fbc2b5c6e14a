"""A live bash session: prompt protocol, readiness, scrollback, send/cancel/close."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import attrs

from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import OperationCancelled, TerminalError
from dsh_terminal_core.provider import ExitStatus, Foreground, TerminalProcess
from dsh_terminal_core.provider.listening import (
    Listener,
    has_children,
    listeners,
    session_processes,
)
from dsh_terminal_core.registry import (
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
from dsh_terminal_core.registry.linematch import LineMatch, LineMatcher
from dsh_terminal_core.registry.overstrike import render
from dsh_terminal_core.registry.scrollback import Scrollback

from .config import BashConfig
from .environment import PROMPT
from .keys import encode_keys
from .modes import ModeTracker
from .operation import BashSendOperation
from .readiness import Readiness, Settlement
from .sanitizer import Chunk, Sanitizer
from .screen import ScreenEmulator

__all__ = ["BashSession", "StartupFailed"]

# Bash's default PS2, behind which it echoes the second and later lines of a send.
CONTINUATION_PROMPT = "> "

# How much output may precede the echo of a send's line: a shell's answer to an
# interrupt of the previous command (a status line, blank lines, its prompt).
_ANSWER_BOUND = 512

_NO_SOCKETS: frozenset[int] = frozenset()

# How long a send that follows a cancelled one waits for it to settle. An interrupted
# command stops and the prompt returns within milliseconds; a program that ignores
# SIGINT keeps the session, and the follower is refused rather than kept waiting.
_FOLLOW_CANCEL_S = 2.0


class StartupFailed(TerminalError):
    """The shell exited or never became ready before its first prompt."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "SPAWN_FAILED")


class BashSession:
    """One bash process on a PTY, driven through the controlled prompt protocol."""

    def __init__(
        self,
        process: TerminalProcess,
        config: BashConfig,
        session_id: str,
        *,
        screen: ScreenEmulator | None = None,
    ) -> None:
        self._process = process
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
        self._exact = process.exact_input_probe
        self._watchers: list[Callable[[], None]] = []
        # Sockets of the session's processes already listening when the latest send's
        # input was written: a result reports only the ones that came after.
        self._listening_before: frozenset[int] = _NO_SOCKETS
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

    def cwd(self) -> str | None:
        pid = self._shell_pgid or self._process.pid
        try:
            return os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return None

    # -- the probe the readiness ladder asks ------------------------------------------

    @property
    def exact(self) -> bool:
        return self._exact

    def shell_at_prompt(self) -> bool:
        foreground = self._process.foreground_pgid()
        if foreground is None:
            return False
        if self._shell_pgid is not None and foreground != self._shell_pgid:
            return False
        # Before the first prompt the shell's group is unknown: its leader is the shell.
        return self._process.is_reading_terminal(foreground)

    def prompt_reader(self) -> tuple[int, int | None] | None:
        foreground = self._process.foreground_pgid()
        if foreground is None:
            return None
        pid = self._prompt_shell(foreground)
        if pid is None:
            return None
        # The wake count comes with the look, read so that "reading" and the count
        # describe one and the same wait.
        wait = self._process.reader_wait(pid)
        if wait is None:
            return None
        if wait.stamp is not None and wait.wakes is not None:
            self._wait_seen = Foreground(
                process_group_id=pid,
                input_waiting=True,
                echo=True,  # not read: a look from before a write is compared by its wait
                wake_count=wait.wakes,
                leader_stamp=wait.stamp,
            )
        return pid, wait.wakes

    def _foreground_before_write(self) -> Foreground | None:
        """The foreground as the stdin-wait tier must remember it from before the write.

        When the last look that found a single-threaded leader reading (the shell at its
        prompt, a REPL between two sends) is provably still the same wait — the same
        group owns the foreground and its leader has not run since the run stamp read in
        that look — the snapshot follows from that look without another: the leader is
        still blocked in the read it was seen in, with the same wake count. Anything else
        takes a full look. The terminal's modes are not read again: the ladder compares a
        look from before the write by its wait alone (group, waiting, wake count).
        """
        seen, self._wait_seen = self._wait_seen, None
        self._stamped_before = None
        if seen is not None and seen.leader_stamp is not None:
            pgid = seen.process_group_id
            if self._process.foreground_pgid() == pgid and not self._process.ran_since(
                pgid, seen.leader_stamp
            ):
                self._stamped_before = seen
                return seen
        return self.foreground()

    def _prompt_shell(self, foreground: int) -> int | None:
        """The pid of the protocol shell leading ``foreground``, or None.

        That is the session's shell, or another instance of the same shell program
        started inside it (``bash``, ``su``, ``sudo -i``, ``exec bash``), which inherited
        the protocol through the environment and leads its own foreground group while
        it reads a line.
        """
        if self._shell_pgid is None or foreground == self._shell_pgid:
            # Before the first prompt the shell's group is unknown: its leader is the shell.
            return foreground
        if (
            self._shell_exe is not None
            and self._process.executable_id(foreground) == self._shell_exe
        ):
            return foreground
        return None

    def is_protocol_shell(self, pgid: int) -> bool:
        return self._prompt_shell(pgid) is not None

    def wake_count(self, pid: int) -> int | None:
        return self._process.wake_count(pid)

    def wake_candidates(self) -> tuple[int, ...]:
        pids = [self._shell_pgid] if self._shell_pgid is not None else []
        foreground = self._process.foreground_pgid()
        if foreground is not None and foreground not in pids:
            pids.append(foreground)
        return tuple(pids)

    def unread_input(self) -> int | None:
        return self._process.unread_input()

    def hidden_prompt(self) -> str | None:
        """The prompt line when a program is provably waiting, echo off, for a line.

        Proof is the exact stdin-wait probe: a member of the foreground group is blocked
        reading this terminal in line mode with ECHO off, no output is pending and no
        earlier input waits unread (it would be joined to the secret). None otherwise,
        and always None where the probe is not exact or a send is running.
        """
        if self._op is not None:
            return None
        return self._hidden_prompt_now()

    def _hidden_prompt_now(self) -> str | None:
        if not self._exact or self._closing or self._status.kind == "exited":
            return None
        foreground = self.foreground()
        if foreground is None or not foreground.input_hidden:
            return None
        if self._process.pending_output() or self._process.unread_input():
            return None
        return self._scrollback.open_line

    def shell_owns_foreground(self) -> bool:
        foreground = self._process.foreground_pgid()
        return foreground is not None and foreground == self._shell_pgid

    def foreground(self) -> Foreground | None:
        seen = self._process.inspect_foreground()
        if seen is not None and seen.leader_stamp is not None:
            self._wait_seen = seen
        return seen

    def shell_group(self) -> int | None:
        return self._shell_pgid

    def pending_output(self) -> int:
        return self._process.pending_output()

    def sole_member(self, pgid: int) -> bool:
        return self._process.sole_member(pgid)

    def foreground_listening(self) -> bool:
        foreground = self._process.foreground_pgid()
        if foreground is None or foreground == self._shell_pgid:
            return False
        for listener in self._new_listeners():
            try:
                if os.getpgid(listener.pid) == foreground:
                    return True
            except OSError:
                continue
        return False

    # -- listening sockets ------------------------------------------------------------

    def listening(self) -> tuple[Listener, ...]:
        """What the session's processes (its foreground and background jobs) listen on now.

        The shell itself is not looked at. One small read when the shell has no
        children, as at an idle prompt.
        """
        shell = self._shell_pgid
        if shell is None or self._status.kind == "exited":
            return ()
        seen = self._wait_seen  # read before the children: see _childless_stamp
        children = self._process.has_children(shell)  # a pread of a kept file
        if children is None:
            children = has_children(shell)
        if not children:
            if seen is not None and seen.process_group_id == shell:
                self._childless_stamp = seen.leader_stamp
            return ()
        self._childless_stamp = None
        return tuple(listeners(session_processes(shell)))

    def _new_listeners(self) -> tuple[Listener, ...]:
        """Listening sockets that were not listening when the latest input was written."""
        now = self.listening()
        if not now:
            return now
        before = self._listening_before
        return tuple(found for found in now if found.inode not in before)

    # -- output -----------------------------------------------------------------------

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after every piece of output and once the session has ended.

        This is what lets a reader wait for a line without polling. The callback runs
        synchronously on the event loop, after the text is in the scrollback and after
        the status says ``exited``; it must not raise and should only wake a waiter.
        Returns a function that removes the callback (harmless to call twice).
        """
        self._watchers.append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._watchers.remove(callback)

        return remove

    def open_line(self) -> str:
        """The line still being written, e.g. a password prompt waiting for its answer."""
        return self._scrollback.open_line

    def _notify(self) -> None:
        if self._watchers:
            for callback in list(self._watchers):
                callback()

    def _on_output(self, data: bytes) -> None:
        self._modes.feed(data)
        if self._screen is not None:
            self._screen.feed(data)
        self._consume(self._sanitizer.feed(data))

    def _consume(self, chunk: Chunk) -> None:
        text = chunk.text
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
        if text:
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
            self._status = SessionStatus(
                kind="exited", exit_code=status.exit_code, signal=status.signal
            )
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
        op = BashSendOperation(
            _bounded(self._config.max_read_bytes, request.max_bytes), self._cancel_op
        )
        if request.wait_for is not None:
            typed = request.text.split("\n") if request.text and request.keys is None else ()
            op.matcher = LineMatcher(
                request.wait_for, echoes=typed, prompts=(PROMPT, CONTINUATION_PROMPT)
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
            on_settle=lambda s: self._settle(op, s, request),
            before=before,
            fenced=not waiting,
            timeout_ms=timeout,
        )
        self._readiness = readiness
        if request.cancel is not None and op.forget_cancel is None:
            op.forget_cancel = request.cancel.on_cancel(lambda _reason: _cancel_unsettled(op))
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
            op.forget_cancel = request.cancel.on_cancel(lambda _reason: _cancel_unsettled(op))
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

    def _must_wait_to_type(self) -> bool:
        """A SIGINT to the shell is unanswered, or a cancel is still in force."""
        return self._interrupt_unanswered or any(not task.done() for task in self._enforcers)

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
        op.collecting = not op.done.done()
        op.viewport.first_line = self._scrollback.open_line_number  # where this output starts
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
            self._listening_before = _NO_SOCKETS
        else:
            listening = self.listening()
            self._listening_before = (
                frozenset(found.inode for found in listening) if listening else _NO_SOCKETS
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

    async def _answer_held_interrupt(self) -> None:
        """Let a shell act on a SIGINT it holds before it reads this send's input.

        Measured with bash 5 here: a SIGINT that reaches bash idle at a prompt that a
        previous SIGINT printed is taken only when the next input arrives, and bash then
        runs that input without its first byte (``cho: command not found``). An empty
        line is the one input that is safe to lose: after any SIGINT to the shell it goes
        first, and the real input follows once a prompt has answered it (or after a
        bound, if none comes).
        """
        self._interrupt_unanswered = False
        self._marker_event.clear()
        with contextlib.suppress(Exception):
            await self._process.write("\r")
            await asyncio.wait_for(
                self._marker_event.wait(), timeout=4 * self._config.poll_interval_ms / 1000
            )

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
        text = self._strip_echo(text, request)
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
        )

    def _strip_echo(self, text: str, request: SendRequest) -> str:
        """Drop the echoed command line when it is exactly identifiable (a token saving)."""
        line = request.text
        if not request.submit or not line or "\n" in line or "\r" in line:
            return text
        if len(PROMPT) + len(line) >= self._config.cols - 1:
            return text  # readline echoes long lines in horizontal-scroll form
        echoed = line + "\n"
        # The shell echoes the line behind the prompt that read it, before running it, so
        # whatever precedes that echo came before this command ran: the shell answering
        # an interrupt of the previous one ("Terminated", a blank line, that prompt) and
        # the terminal's own echo of the line typed ahead of it.
        prompted = PROMPT + echoed
        if text.startswith(prompted):
            return text[len(prompted) :]
        # Only near the start: what comes before is a few short lines, and the command's
        # own output further down may quote its prompt and line.
        at = text.find("\n" + prompted, 0, _ANSWER_BOUND + len(prompted))
        if at >= 0:
            return text[at + 1 + len(prompted) :]
        return text[len(echoed) :] if text.startswith(echoed) else text

    async def _cancel_op(self, op: BashSendOperation) -> None:
        try:
            await self._cancel_and_signal(op)
        finally:
            # Release before this task completes, so a caller that awaited the cancel
            # and then the (already settled) result can send again at once.
            if op.done.done():
                self._release(op)

    async def _cancel_and_signal(self, op: BashSendOperation) -> None:
        """Cancel as the terminal's Ctrl-C does, and keep it in force until the send settles.

        Unwritten input is dropped, input written but not yet read is flushed from the
        terminal (so no suffix of a half-read line can ever run as a command), then the
        foreground group gets SIGINT. A group that takes the foreground afterwards (the
        command was being forked just then) gets SIGINT too, until the send settles.

        A shell's own group is interrupted while the shell is blocked reading its
        terminal (its line editor then drops the partial line and prints a new prompt at
        once). Bash busy between two reads would hold the signal until its next input
        and eat that input's first byte, so a shell busy inside its line editor is left
        to reach its next read, and a shell forking a command is left to start it: the
        command is what gets the SIGINT. The session's shell running a line of builtins
        (its terminal canonical again) gets it once it has run so for two poll intervals
        (see ``_running_own_line``); nothing else would stop a loop of them.
        """
        task = op.write_task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._write_finished(op)
        if self._cancel_over(op):
            return
        readiness = self._readiness
        if readiness is not None and self._op is op:
            readiness.cancelling = True
        self._process.flush_input()
        state = _CancelState()
        self._interrupt(state)
        # Signalling has begun: the caller's await returns now, and the reservation may
        # go as soon as the send settles. Keeping the cancel in force runs beside it.
        enforcer = asyncio.get_running_loop().create_task(self._keep_cancelled(op, state))
        self._enforcers.add(enforcer)
        enforcer.add_done_callback(self._enforcers.discard)

    async def _keep_cancelled(self, op: BashSendOperation, state: _CancelState) -> None:
        delay_ms = 1.0
        while not self._cancel_over(op):
            await asyncio.wait({op.done}, timeout=delay_ms / 1000)
            delay_ms = min(delay_ms * 2, float(self._config.poll_interval_ms))
            if not self._cancel_over(op):
                self._interrupt(state)
        if self._may_hold_cut_line(op, state):
            await self._drop_cut_line(state)

    def _cancel_over(self, op: BashSendOperation) -> bool:
        return op.done.done() or self._ended()

    def _ended(self) -> bool:
        return self._status.kind == "exited" or self._closing

    def _may_hold_cut_line(self, op: BashSendOperation, state: _CancelState) -> bool:
        """The send settled while the shell may still hold the part of the line it read.

        A shell busy between two reads when the rest of its line was flushed keeps the
        part it read in its line editor until an interrupt at its next read drops it.
        That interrupt is what ends such a cancel, unless the send settled first: on
        silence or its deadline, the shell staying busy that long. A prompt (its line
        editor was empty) or an interrupted command (the shell had taken the whole line)
        proves nothing was left.
        """
        if self._ended() or state.markers_at_signal is not None or state.command_signalled:
            return False
        if op.done.cancelled() or op.done.exception() is not None:
            return False
        return op.done.result().wait_reason in (WaitReason.INFERRED_IDLE, WaitReason.TIMEOUT)

    async def _drop_cut_line(self, state: _CancelState) -> None:
        """Interrupt the shell at its next read, which drops the line a cancel cut short.

        Until then the next send waits (see ``_write``): typed behind that part of a
        line, its input would run joined to it.
        """
        delay_ms = 1.0
        while not self._ended():
            self._interrupt(state)
            if state.markers_at_signal is not None:
                return
            await asyncio.sleep(delay_ms / 1000)
            delay_ms = min(delay_ms * 2, float(self._config.poll_interval_ms))

    def _interrupt(self, state: _CancelState) -> None:
        """SIGINT the foreground group if this cancel has not reached it yet."""
        foreground = self._process.foreground_pgid()
        if foreground is None:
            return
        if self._prompt_shell(foreground) is not None:
            # A prompt printed since the last SIGINT is the answer; never interrupt it.
            if state.markers_at_signal is not None and self._markers > state.markers_at_signal:
                return
            now = asyncio.get_running_loop().time()
            if state.shell_signalled_at is not None and now - state.shell_signalled_at < (
                2 * self._config.poll_interval_ms / 1000
            ):
                return
            busy = self._exact and self.prompt_reader() is None
            if busy and not self._running_own_line(foreground, state, now):
                return  # busy between reads: wait for its read, or for its command
            state.shell_signalled_at = now
            state.markers_at_signal = self._markers
        elif foreground in state.groups:
            return
        with contextlib.suppress(TerminalError):
            state.groups.add(self._process.signal_foreground("SIGINT", foreground))
            if self._prompt_shell(foreground) is not None:
                self._interrupt_unanswered = True
            else:
                state.command_signalled = True

    def _running_own_line(self, foreground: int, state: _CancelState, now: float) -> bool:
        """The session's busy shell has been running a line it took whole, for a while.

        Its line editor keeps the terminal out of canonical mode from the first read of a
        line to its end (a key-bound command included) and gives it back before running
        it, so a canonical terminal means the shell is past its line editor: running
        builtins (a loop of them never lets a command take the foreground), where a
        SIGINT stops the line, as Ctrl-C does. The shell is canonical too for the moment
        between a finished line and its next prompt; a SIGINT there is held by the line
        editor until the next input, like one between two reads, so the shell must have
        been seen so, with no prompt printed, across two poll intervals. Once a command
        of the line got the SIGINT, the rest is the shell answering it, left alone. Only
        the session's own shell: a group led by a copy of the shell may be a command's
        child between its fork and its exec, which would lose the signal and then run.
        """
        modes = self._process.terminal_modes()
        canonical = modes is not None and modes[1]
        if state.command_signalled or foreground != self._shell_pgid or not canonical:
            state.running_since = None
            return False
        if state.running_since is None or state.running_markers != self._markers:
            state.running_since = now
            state.running_markers = self._markers
            return False
        return now - state.running_since >= 2 * self._config.poll_interval_ms / 1000

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

    async def _until_shell_reads(self) -> None:
        """Hold a SIGINT for a shell that is busy between two reads, briefly.

        Bash's line editor takes a SIGINT that arrives between two reads only at its
        next input byte, which it then eats (the next send would lose its first
        character). At its read it drops the line and prints a new prompt at once, as
        for a typed Ctrl-C. A foreground command, or a shell that stays busy for
        ``poll_interval_ms``, is signalled as it is.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._config.poll_interval_ms / 1000
        delay = 0.001
        while True:
            foreground = self._process.foreground_pgid()
            if foreground is None or self._prompt_shell(foreground) is None:
                return
            reading = self.prompt_reader() is not None
            if reading and self._process.quietly_asleep(foreground) is not False:
                return
            if loop.time() >= deadline:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.016)

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


@attrs.define
class _CancelState:
    """What one cancel has interrupted so far."""

    groups: set[int] = attrs.field(factory=set)
    shell_signalled_at: float | None = None
    markers_at_signal: int | None = None
    # A command (not a shell) got the SIGINT: the shell had read the whole line.
    command_signalled: bool = False
    # Since when the session's shell has been seen running a line of its own, and the
    # prompt count then (see ``BashSession._running_own_line``).
    running_since: float | None = None
    running_markers: int = 0


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


def _cancel_unsettled(op: BashSendOperation) -> None:
    if not op.done.done():
        op.cancel()


def _without_prompt(text: str, settlement: Settlement) -> str:
    if settlement.by_prompt and text.endswith(PROMPT):
        return text[: -len(PROMPT)]
    return text


def _bounded(own: int, requested: int | None) -> int:
    """The caller's byte bound when it is tighter than the backend's own."""
    return own if requested is None else min(own, requested)
