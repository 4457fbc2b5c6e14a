"""What the readiness ladder asks the terminal, and when: the stdin-wait tier takes no
group look (a scan of /proc) before a new waiter could count, so a shell's startup,
which has no waiter from before to compare with, costs no look in its first
``exact_probe_after_ms``; a REPL that waited before the write is looked at right after
each piece of its answer (its prompt often comes apart from it), a bounded number of
times per send."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_bash.config import BashConfig
from dsh_terminal_bash.readiness import _QUICK_LOOKS as QUICK_LOOKS
from dsh_terminal_bash.readiness import Readiness, Settlement
from dsh_terminal_core.provider import Foreground
from dsh_terminal_core.terminals import WaitReason

TICKS = 6  # probe ticks watched: the backoff's 0, 1, 2, 4, 8, 16 ms


class CountingProbe:
    """A terminal whose foreground group is never reading; counts the group looks and
    the ladder's probe ticks (each tick asks ``exact`` first)."""

    def __init__(self) -> None:
        self.looks = 0
        self.ticks = 0
        self.ticked = asyncio.Event()

    @property
    def exact(self) -> bool:
        self.ticks += 1
        if self.ticks >= TICKS:
            self.ticked.set()
        return True

    def foreground(self) -> Foreground:
        self.looks += 1
        return Foreground(
            process_group_id=4242, input_waiting=False, echo=True, canonical=True, wake_count=0
        )

    def unread_input(self) -> int | None:
        return 0

    def pending_output(self) -> int:
        return 0

    def prompt_reader(self) -> tuple[int, int | None] | None:
        return None

    def shell_group(self) -> int | None:
        return None

    def is_protocol_shell(self, pgid: int) -> bool:
        return False


@pytest.mark.parametrize(("after_ms", "looks"), [(60_000, False), (1, True)])
async def test_startup_takes_no_group_look_before_a_new_waiter_could_count(
    after_ms: int, looks: bool
) -> None:
    probe = CountingProbe()
    settled: list[Settlement] = []
    readiness = Readiness(
        config=BashConfig(exact_probe_after_ms=after_ms),
        probe=probe,  # type: ignore[arg-type]
        prompt="$ ",
        on_settle=settled.append,
        startup=True,
    )
    readiness.start()
    try:
        await asyncio.wait_for(probe.ticked.wait(), 30)
    finally:
        readiness.stop()
    assert settled == []
    assert (probe.looks > 0) is looks


REPL_GROUP = 5151
SHELL_GROUP = 4242


class ReplProbe:
    """A REPL's terminal: the REPL waited before the write, and is found reading again
    (its wake count moved) from the ``reading_from``-th look on."""

    exact = True

    def __init__(self, reading_from: int) -> None:
        self.looks = 0
        self.reading_from = reading_from

    def foreground(self) -> Foreground:
        self.looks += 1
        reading = self.looks >= self.reading_from
        return Foreground(
            process_group_id=REPL_GROUP,
            input_waiting=reading,
            echo=True,
            canonical=False,
            wake_count=2 if reading else 1,
        )

    def unread_input(self) -> int | None:
        return 0

    def pending_output(self) -> int:
        return 0

    def sole_member(self, pgid: int) -> bool:
        return True

    def shell_group(self) -> int | None:
        return SHELL_GROUP

    def is_protocol_shell(self, pgid: int) -> bool:
        return pgid == SHELL_GROUP

    def wake_candidates(self) -> tuple[int, ...]:
        return (SHELL_GROUP, REPL_GROUP)

    def wake_count(self, pid: int) -> int | None:
        return 1


async def _repl_send(probe: ReplProbe, pieces: int) -> tuple[list[Settlement], Readiness]:
    """A send to a REPL whose answer comes in ``pieces`` pieces; the loop gets one turn
    after each piece (no timer can fire: the first timed look is 1 ms away)."""
    settled: list[Settlement] = []
    before = Foreground(
        process_group_id=REPL_GROUP, input_waiting=True, echo=True, canonical=False, wake_count=1
    )
    readiness = Readiness(
        config=BashConfig(),
        probe=probe,  # type: ignore[arg-type]
        prompt="$ ",
        on_settle=settled.append,
        before=before,
    )
    readiness.on_write_start()
    readiness.on_write_done()
    readiness.start()
    for _ in range(pieces):
        readiness.on_output(True, False, None, None)
        await asyncio.sleep(0)  # the look queued after this piece runs
    readiness.stop()
    return settled, readiness


async def test_a_repl_answering_in_two_pieces_settles_on_the_look_after_the_second() -> None:
    probe = ReplProbe(reading_from=2)  # reading only once its prompt (piece 2) is out
    settled, _ = await _repl_send(probe, pieces=2)
    assert probe.looks == 2
    assert [s.reason for s in settled] == [WaitReason.STDIN_READ]


async def test_looks_right_after_output_are_bounded_per_send() -> None:
    probe = ReplProbe(reading_from=1_000)  # never reading: a long answer
    settled, _ = await _repl_send(probe, pieces=20)
    assert settled == []
    assert probe.looks == QUICK_LOOKS
