"""Keeping a cancel in force, and when a SIGINT may go to the shell.

A cancelled send is stopped the way the terminal's Ctrl-C stops it, and then kept stopped
until it settles: a group that takes the foreground afterwards is interrupted too, a line
the cancel cut short is dropped at the shell's next read, and a SIGINT the shell holds is
answered before the next send types. The rules for that (never interrupt a prompt that
answered, leave a shell busy between two reads to reach its read, since bash would eat
the next input's first byte) are what :class:`CancelEnforcement` is; it is separate from
``session.py`` because they form one subtle piece that reads the session's state but owns
no send. :class:`~.session.BashSession` inherits it.

It needs from the session the attributes declared on the class below (all set in
``BashSession.__init__``) and four methods: ``_write_finished`` and ``_release`` (the send
machinery in ``session.py``), and ``_prompt_shell`` and ``prompt_reader`` (the probe, in
``probe.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

import attrs

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.provider import TerminalProcess, in_plain_read
from dsh_terminal_core.registry import SessionStatus, WaitReason

from .config import BashConfig
from .environment import PROMPT
from .operation import BashSendOperation
from .readiness import Readiness
from .scrollback import Scrollback
from .shell import ShellPolicy

__all__ = ["CancelEnforcement"]


class CancelEnforcement:
    """Cancel and interrupt enforcement for a bash session (a mixin of BashSession)."""

    # What it reads and writes of the session (set in ``BashSession.__init__``).
    _process: TerminalProcess
    _config: BashConfig
    _status: SessionStatus
    _closing: bool
    _exact: bool
    _shell_pgid: int | None
    _readiness: Readiness | None
    _op: BashSendOperation | None
    _enforcers: set[asyncio.Task[None]]
    _markers: int
    _marker_event: asyncio.Event
    _interrupt_unanswered: bool
    _shell: ShellPolicy
    _scrollback: Scrollback

    if TYPE_CHECKING:
        # What it calls on the session: defined in session.py and probe.py.

        def _write_finished(self, op: BashSendOperation) -> None: ...

        def _release(self, op: BashSendOperation) -> None: ...

        def _prompt_shell(self, foreground: int) -> int | None: ...

        def prompt_reader(self) -> tuple[int, int | None] | None: ...

    # -- keeping a cancel in force ----------------------------------------------------

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
            if not busy and self._fed_plain_read(foreground, state, now):
                return  # a byte is on its way to the read: signal it at its next wait
            if not busy and self._reprompted_empty_line(state):
                return  # an empty line is on its way: its prompt answers the cancel
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

    def _fed_plain_read(self, foreground: int, state: _CancelState, now: float) -> bool:
        """Feed one space to a shell that would hold a SIGINT in the read it sits in.

        fish's line editor reads a byte only after ``poll`` said one is there; a cancel
        that flushed the terminal in between leaves it blocked in that ``read``, where a
        SIGINT is only taken with the next byte, and that byte is then input: an empty
        line would run the part of the line read before the flush. A space is inserted
        into the line editor, which then waits in ``poll`` again, where the SIGINT drops
        the whole line (the next look signals it). At most one space per poll interval.
        """
        if not (self._exact and self._shell.holds_interrupt_in_read):
            return False
        if not in_plain_read(foreground):
            return False
        if state.fed_at is not None and now - state.fed_at < self._config.poll_interval_ms / 1000:
            return True
        state.fed_at = now
        with contextlib.suppress(OSError, TerminalError):
            self._process.write_now(b" ")
        return True

    def _reprompted_empty_line(self, state: _CancelState) -> bool:
        """Type an empty line to a shell that sits, unanswering, at an empty prompt.

        Seen with fish about once in 75 cancels that land while it reads the line: after
        a SIGINT it sits reading at its prompt with nothing on the line and no marker
        printed, and further SIGINTs bring nothing. The shell is signalled, proved blocked
        reading (so everything it drew is on the screen), nothing is pending, no marker
        came since the SIGINT, and the line on the screen is the bare prompt (spaces at
        most: the one a cancel may have typed, see :meth:`_fed_plain_read`), so its line
        editor holds nothing that an Enter could run: the empty line brings a new prompt,
        which says 130 as the SIGINT left it. Once per cancel, for such a shell only.
        """
        if not self._shell.holds_interrupt_in_read or state.reprompted:
            return False
        if state.markers_at_signal is None or self._markers != state.markers_at_signal:
            return False
        line = self._scrollback.open_line
        if not line.startswith(PROMPT) or line[len(PROMPT) :].strip(" "):
            return False
        if self._process.pending_output() or self._process.unread_input():
            return False
        state.reprompted = True
        with contextlib.suppress(OSError, TerminalError):
            self._process.write_now(b"\r")
        return True

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

    # -- a SIGINT the shell holds -----------------------------------------------------

    def _must_wait_to_type(self) -> bool:
        """A SIGINT to the shell is unanswered, or a cancel is still in force."""
        if self._interrupt_unanswered:
            return True
        # Asked on every send; there is rarely a cancel in force to look through.
        return bool(self._enforcers) and any(not task.done() for task in self._enforcers)

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
    # When a space was last fed to a shell holding its SIGINT in a plain read.
    fed_at: float | None = None
    # An empty line was typed to a shell sitting at an empty prompt without answering.
    reprompted: bool = False
