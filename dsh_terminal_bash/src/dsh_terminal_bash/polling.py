"""Programs that poll their keyboard: when a short-timeout wait is waiting for keys.

A wait on the terminal whose timeout runs out within a second is not proof of waiting
for input (SPEC §14.6): the program may be busy between its polls, as a progress UI or a
game loop is. Yet ``top -d 1``, ``htop -d 5`` and curses programs with ``timeout(200)``
wait for a person in exactly such a wait, and redraw every period, so silence never comes
either (§19.1). :class:`PollingWatch` tells the two apart from what the look
(:class:`dsh_terminal_core.provider.Foreground.polling`) reports, the recurring-poll rule:

* the process has drawn its first frame: it has made a ``write`` call (its own count,
  so neither the echo of the command line nor anything before it counts);
* the same process (pid and start time) is seen in its polling wait at
  :data:`SIGHTINGS` looks, each look at least the previous wait's own timeout after the
  one before, so the wait seen earlier has ended by then, with the thread's wake count
  moved: it left the wait and came back to it, twice;
* between each two of those looks it was busy little: running or waiting for a CPU at
  most :data:`BUSY_SHARE` of the time between them (its thread's scheduler statistics,
  exact, plus the CPU time of the children it reaped, in ticks). Waiting for a CPU
  counts, so a loaded machine cannot make a working program look idle: it gets less
  CPU time per second there, but wants as much. A look in between that finds the
  program elsewhere (drawing its frame) adds nothing and takes nothing away: the count
  between sightings covers whatever it did.

Why twice: a program's one-off short wait must never count. Vim, quitting, waits 100 ms
on stdin and then discards unread input; a program starting up may ask the terminal a
question or two and give each answer 100 ms. A poll that came back twice, two full
periods of doing little, is a program idling in its key loop. What the look guarantees
besides (a single-threaded process, alone in its group, every descriptor its own, so it
cannot be waiting for someone else between its polls) is in the core's
:class:`~dsh_terminal_core.provider.inspector.PollingWait`. Work that comes less often
than every two periods is not seen.

Measured through the ladder on a 2-CPU VM (the busy share between sightings, lowest to
highest): ``top -d 1`` 0.1-0.6 %, ``top -d 0.5`` 0.3-1.5 %, ``htop -d 5`` 0.5-2.7 %, a
curses program idling in ``getch()`` with ``timeout(200)`` 0.02-1.4 %, idle or with 2 or
6 processes spinning on the two CPUs. A poller burning CPU after each 100 ms poll: 15 ms
of it 19-51 %, 25 ms 28-55 %, 50 ms 34-64 %. With 1,000 more processes on the machine
``top -d 0.5`` is at 5 % and still settles; ``htop -d 5`` works 9-18 % of its time
there and does not (it falls to the deadline, as before the rule).
"""

from __future__ import annotations

import attrs

from dsh_terminal_core.provider import Foreground

__all__ = ["BUSY_SHARE", "SIGHTINGS", "PollingWatch"]

SIGHTINGS = 3  # the polling wait seen this often, a period apart: it came back twice
BUSY_SHARE = 0.10  # at most this share of the time between two sightings spent busy


@attrs.frozen(kw_only=True)
class _Sighting:
    """One look that found the program in its polling wait (times in loop seconds)."""

    at: float
    pid: int
    started: int
    timeout: float
    wakes: int
    busy_ns: int


@attrs.define
class PollingWatch:
    """The recurring-poll rule over the looks of one wait; see the module docstring."""

    _seen: list[_Sighting] = attrs.field(factory=list)

    def reset(self) -> None:
        """Forget every sighting: what follows must prove itself from the start."""
        self._seen.clear()

    @property
    def next_look(self) -> float | None:
        """The loop time from which the next look can add a sighting; None before the first."""
        if not self._seen:
            return None
        last = self._seen[-1]
        return last.at + last.timeout

    def see(self, foreground: Foreground, at: float) -> bool:
        """Take a look (at loop time ``at``) that found ``foreground.polling``; True once
        the rule holds: the program waits for keys.

        A sighting too soon after the last one (its wait may still be that one) is not
        kept, nor one before the program's first write. Another process, an unmoved wake
        count, or too much CPU since the last sighting starts the count over from this
        look.
        """
        polling = foreground.polling
        if polling is None:
            return False
        if not polling.writes:
            self._seen.clear()  # nothing drawn yet: its first frame is still to come
            return False
        seen = _Sighting(
            at=at,
            pid=polling.pid,
            started=polling.started,
            timeout=polling.timeout_ns / 1e9,
            wakes=polling.wakes if polling.wakes is not None else -1,
            busy_ns=polling.busy_ns,
        )
        last = self._seen[-1] if self._seen else None
        if last is None or (last.pid, last.started) != (seen.pid, seen.started):
            self._seen = [seen]
            return False
        if at < last.at + last.timeout:
            return False
        busy = seen.busy_ns - last.busy_ns > BUSY_SHARE * (at - last.at) * 1e9
        if seen.wakes < 0 or seen.wakes == last.wakes or busy:
            self._seen = [seen]
            return False
        self._seen.append(seen)
        return len(self._seen) >= SIGHTINGS
