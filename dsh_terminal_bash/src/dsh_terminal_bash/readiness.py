"""The readiness ladder: when has a send (or the shell's startup) finished waiting?

One :class:`Readiness` watches one wait. It is driven by events — output arriving, the
write completing, the shell exiting — and by a few timers; there is no fixed-rate loop on
the prompt path. The tiers, strongest evidence first:

1. *prompt* → ``stdin_read``: a marker arrived after this send's input was completely
   written (the write fence), the printable tail after it is exactly the controlled
   prompt, the terminal's foreground group is a protocol shell's, and that shell is
   blocked reading the terminal. Checked the moment the data arrives, then on a short
   backoff (1, 2, 4 ... ms) while the shell settles into its read. Foreground ownership
   alone is not proof: a command can print a forged marker and prompt with a builtin
   while bash still owns the foreground, busy elsewhere. Where the exact probe exists the
   consumption fence applies too: no byte of input is left unread on the terminal, and
   the shell's read wait is new since the write (its wake counter moved), so a
   prompt printed before the shell took the input (an interrupted command's, or the one
   before a typed-ahead line) never settles the send that wrote it.
2. *exact stdin wait* (Linux) → ``stdin_read``: once output has paused, the foreground
   group is blocked reading the terminal. A group that was already waiting before the
   write must first be seen to have left that wait (its threads' wake counter moved); a
   group that was not waiting then counts after ``exact_probe_after_ms``. No output
   may be pending and no input unread. A PTY hands a program's last write to the
   reader side through a kernel work queue, so a program can already be blocked
   reading while its final output is in flight; the pending-output check flushes that
   work before it counts, so a group whose leader is its only member settles at
   the first look. A group with other members (a pipeline) must hold the wait,
   output-free, for ``_CONFIRM_MS``: a later stage may still be writing. For the
   shell's own group the hold is one poll interval, so the prompt tier (which carries
   the exit code) wins whenever it can. A program polling its keyboard with a short
   timeout (``top -d 1``) is no proof at one look; it settles here once it has come back
   to that wait twice, a period apart, busy little between (:mod:`.polling`).
3. *listening* → ``inferred_idle`` once the foreground program listens on a socket it
   opened after the write (a server that came up) and its output has paused
   ``listen_settle_ms``: waiting out the whole silence would tell the model nothing more.
   Looked at after ``listen_settle_ms`` of quiet, then after twice as long each time
   while it stays quiet; never during startup.
4. *periodic* → ``inferred_idle`` with ``periodic`` set, for a program that redraws on
   a clock and never waits on the terminal (``watch -n 1 date``, ``tail -f`` of a log
   written on a beat, a progress display): its output comes in short bursts, each after
   a quiet gap, at a steady period, from the same foreground group, and no look found
   it waiting on the terminal. Silence never comes for such a program, so without this
   it ran out the send's budget. Settles once the third burst has ended: about two of
   its periods after its first frame (:mod:`.periodic`).
5. *silence* → ``inferred_idle`` after ``idle_silence_ms`` without output
   (+ ``handoff_grace_ms`` once a marker was seen). During startup an empty silence
   never counts.
6. *deadline* → ``timeout`` after ``timeout_ms``.

``session_exit`` settles at once when the shell exits.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple, Protocol

from dsh_terminal_core.provider import Foreground
from dsh_terminal_core.registry import WaitReason
from dsh_terminal_core.registry.linematch import LineMatch

from .callbacks import CALLBACKS_CONTEXT
from .config import BashConfig
from .periodic import BurstWatch, bursts_start
from .polling import PollingWatch

__all__ = ["Readiness", "ReadinessProbe", "Settlement"]

# Backoff for re-checks after new evidence; beyond the last step the fallback cadence
# (poll_interval_ms) takes over.
_BACKOFF_MS = (1, 2, 4, 8, 16, 32)

# Looks taken right after a piece of a REPL's answer, per send (see ``Readiness``).
_QUICK_LOOKS = 4
_NO_WAKES: Mapping[int, int | None] = MappingProxyType({})

# How long a wait must hold, output-free, when another member of the waiting group may
# still be writing.
_CONFIRM_MS = 2.0


class Settlement(NamedTuple):
    """How a wait ended. ``exit_code`` comes from the marker when the prompt tier settled.

    A named tuple: every send ends with one, where a frozen class costs several times as
    much to build.
    """

    reason: WaitReason
    exit_code: int | None = None
    input_hidden: bool = False
    by_prompt: bool = False
    match: LineMatch | None = None
    #: Settled by the periodic tier: the program redraws on a clock, never reading keys.
    periodic: bool = False


class ReadinessProbe(Protocol):
    """What the ladder may ask the session about the terminal right now."""

    @property
    def exact(self) -> bool:
        """True where the exact stdin-wait probe exists (Linux)."""
        ...

    def shell_at_prompt(self) -> bool:
        """The shell's group owns the foreground and the shell is blocked reading the terminal."""
        ...

    def prompt_reader(self) -> tuple[int, int | None] | None:
        """The protocol shell owning the foreground, if it is blocked reading the terminal.

        Returns its pid and its wake count, read on both sides of the reading check so
        the pair describes one wait; None when no such shell is reading now.
        """
        ...

    def wake_count(self, pid: int) -> int | None:
        """``pid``'s wake counter now; None when unknown."""
        ...

    def wake_candidates(self) -> tuple[int, ...]:
        """Processes whose read wait the consumption fence remembers at the write."""
        ...

    def unread_input(self) -> int | None:
        """Input bytes no program has read yet; None when unknown."""
        ...

    def is_protocol_shell(self, pgid: int) -> bool:
        """``pgid`` is led by the session's shell or another instance of it (nested)."""
        ...

    def shell_owns_foreground(self) -> bool: ...

    def foreground(self) -> Foreground | None: ...

    def shell_group(self) -> int | None:
        """The shell's own process group once learned."""
        ...

    def pending_output(self) -> int:
        """Bytes already on the terminal that the reader has not delivered yet."""
        ...

    def sole_member(self, pgid: int) -> bool:
        """Group ``pgid`` provably holds its leader alone."""
        ...

    def foreground_listening(self) -> bool:
        """A process of the foreground group (not the shell's) listens on a socket that
        began listening after the send's input was written."""
        ...

    def foreground_group(self) -> int | None:
        """The terminal's foreground process group now (one ``tcgetpgrp``); None if unknown."""
        ...


class Readiness:
    """The ladder for one wait; calls ``on_settle`` exactly once.

    ``before`` is the foreground as looked at before the write; the ladder compares it by
    its wait alone (its group, whether it waited, its wake count), never by its modes.
    """

    # Slotted: a send builds one ladder, and with more attribute names than an instance
    # dictionary shares between instances, each ladder grew a dictionary of its own, one
    # more object for the garbage collector to traverse while the send is in flight.
    __slots__ = (
        "_activity_at",
        "_any_output",
        "_before",
        "_bursts",
        "_config",
        "_deadline_due",
        "_dispatching",
        "_fenced",
        "_first_text_at",
        "_listen_due",
        "_listen_looks",
        "_listen_quiet_since",
        "_loop",
        "_marker_exit",
        "_marker_seen",
        "_on_settle",
        "_polls",
        "_probe",
        "_probe_due",
        "_probe_step",
        "_prompt",
        "_prompt_tail_at",
        "_quick_look_queued",
        "_quick_looks_left",
        "_silence_due",
        "_started",
        "_started_at",
        "_startup",
        "_terminal_seen",
        "_timer",
        "_timer_at",
        "_wait_seen_at",
        "_wakes_at_write",
        "_write_done",
        "_write_started",
        "cancelling",
        "settled",
    )

    def __init__(
        self,
        *,
        config: BashConfig,
        probe: ReadinessProbe,
        prompt: str,
        on_settle: Callable[[Settlement], None],
        startup: bool = False,
        before: Foreground | None = None,
        fenced: bool = True,
        timeout_ms: int | None = None,
    ) -> None:
        self._config = config
        self._probe = probe
        self._prompt = prompt
        self._on_settle = on_settle
        self._startup = startup
        self._before = before
        #: Wake counters at the moment the input was completely written (consumption fence).
        self._wakes_at_write: Mapping[int, int | None] = _NO_WAKES
        self._write_started = self._any_output = self._marker_seen = False
        self._marker_exit: int | None = None
        self._prompt_tail_at: float | None = None
        self._wait_seen_at: float | None = None
        #: Sightings of a program polling its keyboard; made at the first one, since almost
        #: every send settles without any.
        self._polls: PollingWatch | None = None
        #: Bursts of output of a program redrawing on a clock; made at the first quiet gap.
        self._bursts: BurstWatch | None = None
        self._first_text_at: float | None = None
        #: A look found the foreground waiting on the terminal (a proof or a polling wait):
        #: such a program is for the stdin-wait tiers, never the periodic one.
        self._terminal_seen = False
        self.settled = False
        #: Set while a cancel is in force: a shell's read is then only trusted with the
        #: prompt that follows the interrupt (the line editor can sit in a read after
        #: echoing ^C, before it drops the line and prints the new prompt).
        self.cancelling = False
        self._probe_step = self._quick_looks_left = self._listen_looks = 0
        self._quick_look_queued = self._started = self._dispatching = False
        self._probe_due: float | None = None
        self._listen_due: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        loop = self._loop = asyncio.get_running_loop()
        started = self._started_at = self._activity_at = self._listen_quiet_since = loop.time()
        self._write_done = startup or not fenced
        self._fenced = fenced and not startup
        # A program other than the shell that waited for input before the write (a REPL)
        # usually waits again right after it answers: a look as soon as a piece of its
        # output has been taken, before the timers (whose granularity is a millisecond).
        # A REPL often writes its answer and its prompt apart, and only the look after
        # the prompt can find it reading, so each piece gets one, up to a bound that
        # keeps a long answer from paying a look per piece.
        if (
            before is not None
            and before.input_waiting
            and before.process_group_id != probe.shell_group()
        ):
            self._quick_looks_left = _QUICK_LOOKS
        # When each timed look is due (loop time), all served by one timer: a send that
        # settles at its first output arms and cancels one timer, not three.
        self._silence_due: float | None = started + max(config.idle_silence_ms / 1000, 0.001)
        if not startup:
            self._listen_due = started + config.listen_settle_ms / 1000
        self._deadline_due: float | None = started + (
            (timeout_ms if timeout_ms is not None else config.timeout_ms) / 1000
        )

    def start(self) -> None:
        """Arm the timers; until then a wait is judged only on events.

        Separate from construction so a send can write first and arm once: its write
        usually finishes within ``start_send`` and moves the first timed look earlier.
        """
        if self._started:
            return
        self._started = True
        if self._startup:
            self._arm_probe(0)
        self._schedule()

    # -- events -----------------------------------------------------------------------

    def on_wait_start(self, prompt_showing: bool, exit_code: int | None) -> None:
        """A wait without input starts; look at once.

        There is no input to fence, so a marker already seen counts: when the terminal
        already shows the controlled prompt (``prompt_showing``, with the marker's
        ``exit_code``), a shell idle at it settles at once.
        """
        if prompt_showing:
            self._marker_seen = True
            self._marker_exit = exit_code
            self._prompt_tail_at = self._loop.time()
        self._arm_probe(0)

    def on_write_start(self, known: Foreground | None = None) -> None:
        """The input is about to be written: remember where the shells' wake counters are.

        Read before the write rather than after it: a shell can take the input, run a
        short command and block again before the writer reads the counter back (it is
        woken on the other core while the writer is preempted), and a count read then
        would reject the genuine prompt. A wait that began between this look and the end
        of the write is not proof on its own either; the input-consumed check answers it.

        ``known``: a look at the foreground taken since the previous write and before
        this one. When it found a single-threaded leader reading, its count is that
        leader's counter before the write, and is taken instead of reading it again.
        """
        if self._fenced and self._probe.exact and not self._write_started:
            self._write_started = True
            taken = (
                {known.process_group_id: known.wake_count}
                if known is not None and known.input_waiting and known.leader_stamp is not None
                else {}
            )
            self._wakes_at_write = {
                pid: taken[pid] if pid in taken else self._probe.wake_count(pid)
                for pid in self._probe.wake_candidates()
            }

    def on_write_done(self) -> None:
        """The whole input is in the terminal; the stdin-wait tier may look from now on."""
        if self._write_done and not self._startup:
            return
        if not self._write_started:  # a write cancelled before it began still sets the baseline
            self.on_write_start()
        self._write_done = True
        self._activity_at = self._loop.time()
        self._probe_step = 0
        self._arm_probe(_BACKOFF_MS[0])

    def on_output(
        self, has_text: bool, marker: bool, marker_exit: int | None, tail: str | None
    ) -> None:
        """New output was sanitized: ``tail`` is the printable text after the latest marker."""
        if self.settled:
            return
        now = self._loop.time()
        if has_text or marker:
            if has_text and self._write_done and not self._startup:
                self._see_burst(now)
            self._any_output = True
            self._activity_at = now
            self._wait_seen_at = None
        if marker and self._write_done:
            # A marker from before the input was completely written belongs to an
            # earlier command (the write fence); only later ones are evidence.
            self._marker_seen = True
            self._marker_exit = marker_exit
        if self._marker_seen and tail == self._prompt:
            if self._prompt_tail_at is None or marker:
                self._prompt_tail_at = now
            if self._check_prompt():
                return
        else:
            self._prompt_tail_at = None
        self._probe_step = 0
        self._arm_probe(_BACKOFF_MS[0])
        if self._quick_looks_left and has_text and self._write_done and not self._quick_look_queued:
            self._quick_looks_left -= 1
            self._quick_look_queued = True
            self._loop.call_soon(self._quick_look, context=CALLBACKS_CONTEXT)

    def on_exit(self) -> None:
        self._settle(Settlement(reason=WaitReason.SESSION_EXIT, exit_code=None))

    def on_match(self, match: LineMatch) -> None:
        """A complete line written after the input matched the send's ``wait_for``.

        Says only that the line came: no tier's proof is implied, so no exit code.
        """
        self._settle(Settlement(reason=WaitReason.MATCHED, match=match))

    def stop(self) -> None:
        """Stop watching without settling (the session is closing)."""
        self.settled = True
        self._cancel_timers()

    # -- tiers ------------------------------------------------------------------------

    def _check_prompt(self) -> bool:
        if self._prompt_tail_at is None:
            return False
        if self._probe.exact:
            ready = self._input_consumed() and self._prompt_wait_is_new()
        else:
            # Without a syscall probe the prompt must stay the tail, with the shell in the
            # foreground, for one poll interval.
            held = self._loop.time() - self._prompt_tail_at >= self._config.poll_interval_ms / 1000
            ready = held and self._probe.shell_owns_foreground()
        if ready and self._probe.pending_output():
            ready = False  # more output is already on its way; it will re-trigger the check
        if ready:
            self._settle(
                Settlement(
                    reason=WaitReason.STDIN_READ, exit_code=self._marker_exit, by_prompt=True
                )
            )
        return ready

    def _input_consumed(self) -> bool:
        """No byte of input waits unread on the terminal (unknown counts as consumed)."""
        if not self._fenced:
            return True
        unread = self._probe.unread_input()
        return unread is None or unread == 0

    def _prompt_wait_is_new(self) -> bool:
        """A protocol shell is blocked reading, in a wait it entered after the write."""
        reader = self._probe.prompt_reader()
        if reader is None:
            return False
        pid, wakes = reader
        before = self._wakes_at_write.get(pid)
        return before is None or wakes is None or wakes > before

    def _check_stdin_wait(self) -> bool:
        if not (self._probe.exact and self._write_done):
            return False
        if not self._input_consumed():
            self._wait_seen_at = None
            return False
        before = self._before
        if (before is None or not before.input_waiting) and self._too_early_for_new_waiter():
            # No waiter from before the write to compare with, and a new one does not
            # count yet: the group look (a scan of /proc) could not change the answer.
            return False
        foreground = self._probe.foreground()
        if foreground is not None and (foreground.input_waiting or foreground.polling):
            self._terminal_seen = True
        if foreground is None or not foreground.input_waiting:
            self._wait_seen_at = None
            return foreground is not None and self._check_polling(foreground)
        same_waiter = (
            before is not None
            and before.input_waiting
            and before.process_group_id == foreground.process_group_id
        )
        if same_waiter:
            assert before is not None
            if foreground.wake_count == before.wake_count:
                return False  # still the wait from before the write: not new evidence
        elif self._too_early_for_new_waiter():
            return False
        pgid = foreground.process_group_id
        shell = pgid == self._probe.shell_group() or self._probe.is_protocol_shell(pgid)
        if shell and self.cancelling:
            return False
        hold_ms = 0.0
        if shell:
            # The shell's own read settles through this tier only after a poll interval,
            # so the prompt tier (which carries the exit code) wins whenever it can.
            hold_ms = self._config.poll_interval_ms
        elif not self._probe.sole_member(pgid):
            # Another member (a pipeline's next stage) may still be writing what the
            # reader produced: the wait must hold, output-free, for a moment.
            hold_ms = _CONFIRM_MS
        if hold_ms:
            now = self._loop.time()
            if self._wait_seen_at is None:
                self._wait_seen_at = now
            held_ms = (now - self._wait_seen_at) * 1000
            if held_ms + 0.1 < hold_ms:
                self._arm_probe(hold_ms - held_ms)
                return False
        # The reader is blocked, so everything it wrote is already on the PTY: asking for
        # pending output flushes the kernel's hand-over work before it counts, so
        # "nothing pending" means its last write has arrived.
        if self._probe.pending_output():
            self._wait_seen_at = None
            return False
        self._settle(
            Settlement(
                reason=WaitReason.STDIN_READ,
                exit_code=None,
                input_hidden=foreground.input_hidden,
            )
        )
        return True

    def _check_polling(self, foreground: Foreground) -> bool:
        """Settle on a program polling its keyboard once it keeps coming back, idle.

        The recurring-poll rule of :mod:`.polling`, for a look that found no proof: never
        for a protocol shell (its prompt tier carries the exit code), and with the fences
        of the tier above already applied (input consumed) and nothing left pending. Each
        sighting arms one look for when its wait has run out; between, the tier's own
        cadence looks as before.
        """
        if foreground.polling is None:
            return False
        polls = self._polls
        if polls is None:
            polls = self._polls = PollingWatch()
        pgid = foreground.process_group_id
        if pgid == self._probe.shell_group() or self._probe.is_protocol_shell(pgid):
            polls.reset()
            return False
        now = self._loop.time()
        if not polls.see(foreground, now):
            due = polls.next_look
            if due is not None:
                self._arm_probe(max(due - now, 0.0) * 1000 + 1)
            return False
        if self._probe.pending_output():
            return False
        self._settle(Settlement(reason=WaitReason.STDIN_READ, exit_code=None))
        return True

    def _see_burst(self, now: float) -> None:
        """Output arrived at ``now``: a new burst if it follows a quiet gap."""
        bursts = self._bursts
        if bursts is None:
            if self._first_text_at is None:
                self._first_text_at = now
                return
            if not bursts_start(self._activity_at, now):
                return  # nearly every send settles before its output ever pauses
            bursts = self._bursts = BurstWatch(self._first_text_at)
        bursts.output(now, self._activity_at, self._probe.foreground_group)

    def _check_periodic(self) -> bool:
        """Settle on a program redrawing on a clock: see :mod:`.periodic`.

        Never for a protocol shell's group, nor for a program any look found waiting on
        the terminal (a refresher polling its keys settles ``stdin_read`` instead), and
        one more look must find it not waiting there now.
        """
        bursts = self._bursts
        if bursts is None or self._terminal_seen or not self._write_done:
            return False
        now = self._loop.time()
        group = bursts.steady_group(now, self._activity_at)
        if group is None:
            return False
        if group == self._probe.shell_group() or self._probe.is_protocol_shell(group):
            return False
        if self._probe.foreground_group() != group:
            return False
        if self._probe.exact:
            foreground = self._probe.foreground()
            if foreground is None or foreground.input_waiting or foreground.polling:
                self._terminal_seen = foreground is not None
                return False
        self._settle(Settlement(reason=WaitReason.INFERRED_IDLE, periodic=True))
        return True

    def _too_early_for_new_waiter(self) -> bool:
        """A group that was not waiting before the write counts after ``exact_probe_after_ms``."""
        return self._loop.time() - self._started_at < self._config.exact_probe_after_ms / 1000

    def _quick_look(self) -> None:
        self._quick_look_queued = False
        if not self.settled:
            self._check_stdin_wait()

    def _on_probe(self) -> None:
        if self.settled:
            return
        quiet_for = self._loop.time() - self._activity_at
        wanted = self._delay_for(self._probe_step)
        if quiet_for + 1e-4 < wanted:
            # Output is still flowing; look again once it has paused.
            self._arm_probe((wanted - quiet_for) * 1000)
            return
        if self._check_prompt() or self._check_stdin_wait() or self._check_periodic():
            return
        self._probe_step += 1
        self._arm_probe(self._delay_for(self._probe_step) * 1000)

    def _delay_for(self, step: int) -> float:
        if step < len(_BACKOFF_MS):
            return min(_BACKOFF_MS[step], self._config.poll_interval_ms) / 1000
        return self._config.poll_interval_ms / 1000

    def _on_silence(self) -> None:
        if self.settled:
            return
        needed = self._config.idle_silence_ms / 1000
        if self._marker_seen:
            needed += self._config.handoff_grace_ms / 1000
        quiet_for = self._loop.time() - self._activity_at
        if quiet_for + 1e-4 < needed:
            self._arm_silence(needed - quiet_for)
            return
        if self._startup and not self._any_output:
            self._arm_silence(needed)  # an empty silence never proves a shell started
            return
        self._settle(Settlement(reason=WaitReason.INFERRED_IDLE))

    def _on_listen(self) -> None:
        """The listening tier: a server that came up settles after a short pause."""
        if self.settled:
            return
        pause = self._config.listen_settle_ms / 1000
        quiet_for = self._loop.time() - self._activity_at
        if quiet_for + 1e-4 < pause or not self._write_done:
            self._listen_due = self._loop.time() + max(pause - quiet_for, 0.001)
            self._schedule()
            return
        if self._probe.foreground_listening():
            self._settle(Settlement(reason=WaitReason.INFERRED_IDLE))
            return
        # Quiet and not listening (a build between two steps, a server still starting):
        # look again after twice the wait, so a long quiet stretch costs a few looks at
        # the process tree, not one every pause; new output starts the series over.
        if self._listen_quiet_since != self._activity_at:
            self._listen_quiet_since = self._activity_at
            self._listen_looks = 0
        self._listen_looks += 1
        self._listen_due = self._loop.time() + pause * (1 << min(self._listen_looks, 4))
        self._schedule()

    def _on_deadline(self) -> None:
        self._settle(Settlement(reason=WaitReason.TIMEOUT))

    # -- plumbing ---------------------------------------------------------------------

    def _arm_probe(self, delay_ms: float) -> None:
        if self.settled:
            return
        when = self._loop.time() + delay_ms / 1000
        if self._probe_due is not None and self._probe_due <= when:
            return
        self._probe_due = when
        self._schedule()

    def _arm_silence(self, delay: float) -> None:
        self._silence_due = self._loop.time() + max(delay, 0.001)
        self._schedule()

    def _schedule(self) -> None:
        """Keep the one timer at the earliest look due; a later timer is moved earlier,
        an earlier one is left to fire and re-arm."""
        if self.settled or not self._started or self._dispatching:
            return
        dues = [
            due
            for due in (self._probe_due, self._listen_due, self._silence_due, self._deadline_due)
            if due is not None
        ]
        when = min(dues) if dues else math.inf
        timer = self._timer
        if timer is not None:
            if self._timer_at <= when:
                return
            timer.cancel()
        if when == math.inf:
            self._timer = None
            return
        self._timer_at = when
        self._timer = self._loop.call_at(when, self._on_timer, context=CALLBACKS_CONTEXT)

    def _on_timer(self) -> None:
        """Run every look that is due, earliest first, then re-arm for the next."""
        self._timer = None
        # The loop runs a timer once its time is within the clock's resolution: whatever
        # was due by the timer's own time is due now.
        now = max(self._loop.time(), self._timer_at)
        self._dispatching = True
        try:
            self._run_due(now)
        finally:
            self._dispatching = False
        self._schedule()

    def _run_due(self, now: float) -> None:
        while not self.settled:
            due = [
                (when, action)
                for when, action in (
                    (self._probe_due, self._fire_probe),
                    (self._listen_due, self._fire_listen),
                    (self._silence_due, self._fire_silence),
                    (self._deadline_due, self._fire_deadline),
                )
                if when is not None and when <= now
            ]
            if not due:
                break
            min(due, key=_due_time)[1]()

    def _fire_probe(self) -> None:
        self._probe_due = None
        self._on_probe()

    def _fire_silence(self) -> None:
        self._silence_due = None
        self._on_silence()

    def _fire_listen(self) -> None:
        self._listen_due = None
        self._on_listen()

    def _fire_deadline(self) -> None:
        self._deadline_due = None
        self._on_deadline()

    def _cancel_timers(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._probe_due = self._silence_due = self._deadline_due = self._listen_due = None

    def _settle(self, settlement: Settlement) -> None:
        if self.settled:
            return
        self.settled = True
        self._cancel_timers()
        self._on_settle(settlement)


def _due_time(item: tuple[float | None, Callable[[], None]]) -> float:
    when = item[0]
    assert when is not None
    return when
