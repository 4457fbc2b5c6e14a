"""Programs that redraw on a clock and never read the terminal: when to stop waiting.

``watch -n 1 date`` redraws every second and ``tail -f`` of a log written on a beat
prints on that beat; neither ever waits on the terminal, so no stdin-wait tier can
settle, and silence never comes (SPEC §28: ``watch -n 1 date`` ran out a 15 s budget).
What the model can be told honestly is what the stream shows: output comes in short
bursts at a steady period, and it will go on. :class:`BurstWatch` recognises that from
the arrival times of output alone, with the foreground group read once per burst:

* a *burst* starts with output after at least :data:`GAP` of quiet. The send's first
  output is a burst of the program's only if output went on after the echo within it
  (it spans :data:`ECHO_ONLY` or more: a program that starts at once draws its first
  frame a few milliseconds after the echo). The echo alone is not: a program whose
  start-up happens to take as long as its period would look like a beat (the echo,
  then its first line a period later, then its second);
* the last three burst starts are a steady beat: both periods at least
  :data:`MIN_PERIOD`, the longer at most :data:`STEADY` times the shorter;
* the latest burst is short for its beat (at most half the shorter period) and over:
  quiet for :data:`GAP` since;
* the same foreground group started the last two bursts and owns the terminal now: a
  shell loop (``while :; do date; sleep 1; done``) runs a new group for every command.

That is the third burst, about two periods after the first frame. The ladder adds its
own conditions (:meth:`.readiness.Readiness._check_periodic`): never a protocol shell's
group, never a program any look found waiting on the terminal (``top`` polls its keys
and settles ``stdin_read``), and one more look finds it not waiting there. The result is
``inferred_idle`` with ``periodic`` set: the command keeps running, and the model may
read, wait again, or interrupt it. Output that comes irregularly (a build, a busy log
written at random) is not a beat: it falls to silence or the deadline as before.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

__all__ = ["ECHO_ONLY", "GAP", "MIN_PERIOD", "STEADY", "BurstWatch", "bursts_start"]

GAP = 0.05  # quiet before output that starts a burst, and after the last one (seconds)
MIN_PERIOD = 0.1  # a faster beat is a stream, not a redraw
STEADY = 1.5  # the longer of two periods at most this many times the shorter
ECHO_ONLY = 0.001  # a first burst shorter than this held the echo alone


def bursts_start(previous_output: float, now: float) -> bool:
    """Whether output at ``now`` after output (or the write) at ``previous_output`` is
    a second burst, the point where watching for a beat begins."""
    return now - previous_output >= GAP


@attrs.define
class BurstWatch:
    """Burst starts of one send's output, with the foreground group at each."""

    first: float
    _starts: list[float] = attrs.field(factory=list)
    _groups: list[int | None] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self._starts.append(self.first)
        self._groups.append(None)  # the echo's: the program may not own the terminal yet

    def output(self, now: float, previous: float, group: Callable[[], int | None]) -> None:
        """Output arrived at ``now``, the previous at ``previous``: note a new burst.

        ``group`` reads the foreground group now, once per burst.
        """
        if now - previous < GAP:
            return
        if len(self._starts) == 1 and self._groups[0] is None and previous - self.first < ECHO_ONLY:
            self._starts.clear()  # the first output was the echo alone
            self._groups.clear()
        self._starts.append(now)
        self._groups.append(group())
        if len(self._starts) > 3:
            del self._starts[0], self._groups[0]

    def steady_group(self, now: float, last_output: float) -> int | None:
        """The foreground group of a steady beat that has just ended a burst, or None."""
        if len(self._starts) < 3 or now - last_output < GAP:
            return None
        first, second, third = self._starts
        shorter, longer = sorted((second - first, third - second))
        if shorter < MIN_PERIOD or longer > STEADY * shorter:
            return None
        if last_output - third > shorter / 2:
            return None
        if self._groups[1] is None or self._groups[1] != self._groups[2]:
            return None
        return self._groups[2]
