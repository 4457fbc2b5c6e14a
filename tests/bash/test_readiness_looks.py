"""What the readiness ladder asks the terminal, and when: the stdin-wait tier takes no
group look (a scan of /proc) before a new waiter could count, so a shell's startup,
which has no waiter from before to compare with, costs no look in its first
``exact_probe_after_ms``; a REPL that waited before the write is looked at right after
each piece of its answer (its prompt often comes apart from it), a bounded number of
times per send; and the consumption fence's baseline comes from the look taken before
the write when that look already holds it."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_bash.config import BashConfig
from dsh_terminal_bash.readiness import _QUICK_LOOKS as QUICK_LOOKS
from dsh_terminal_bash.readiness import Readiness, Settlement
from dsh_terminal_core.provider import Foreground
from dsh_terminal_core.registry import WaitReason

TICKS = 6  # probe ticks watched: the backoff's 0, 1, 2, 4, 8, 16 ms


def _ladder(
    probe: object,
    settled: list[Settlement],
    *,
    config: BashConfig | None = None,
    startup: bool = False,
    before: Foreground | None = None,
) -> Readiness:
    """A ladder watching a stand-in ``probe``, its settlements appended to ``settled``."""
    return Readiness(
        config=config if config is not None else BashConfig(),
        probe=probe,  # type: ignore[arg-type]
        prompt="$ ",
        on_settle=settled.append,
        startup=startup,
        before=before,
    )


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
    readiness = _ladder(
        probe, settled, config=BashConfig(exact_probe_after_ms=after_ms), startup=True
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

    def foreground_listening(self) -> bool:
        return False

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
    readiness = _ladder(probe, settled, before=before)
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


class BaselineProbe:
    """A shell (group 10) and one more candidate (group 20); the shell's reader is found
    with the wake count the test sets, and every wake count read is recorded."""

    def __init__(self) -> None:
        self.read: list[int] = []
        self.reader_wakes = 0

    @property
    def exact(self) -> bool:
        return True

    def wake_candidates(self) -> tuple[int, ...]:
        return (10, 20)

    def wake_count(self, pid: int) -> int | None:
        self.read.append(pid)
        return 100 + pid

    def prompt_reader(self) -> tuple[int, int | None] | None:
        return 10, self.reader_wakes

    def unread_input(self) -> int | None:
        return 0

    def pending_output(self) -> int:
        return 0

    def shell_group(self) -> int | None:
        return 10


def _looked(*, waiting: bool, stamp: bytes | None) -> Foreground:
    return Foreground(
        process_group_id=10,
        input_waiting=waiting,
        echo=True,
        canonical=True,
        wake_count=7,
        leader_stamp=stamp,
    )


@pytest.mark.parametrize(
    ("looked", "baseline", "read"),
    [
        # A single-threaded leader seen reading: its count is the baseline, not read again.
        (_looked(waiting=True, stamp=b"5 0 1\n"), 7, [20]),
        # No run stamp (a threaded leader) or no wait: every candidate's count is read.
        (_looked(waiting=True, stamp=None), 110, [10, 20]),
        (_looked(waiting=False, stamp=b"5 0 1\n"), 110, [10, 20]),
        (None, 110, [10, 20]),
    ],
)
async def test_the_consumption_fence_takes_its_baseline_from_the_look_before_the_write(
    looked: Foreground | None, baseline: int, read: list[int]
) -> None:
    probe = BaselineProbe()
    settled: list[Settlement] = []
    readiness = _ladder(probe, settled, before=looked)
    readiness.on_write_start(looked)
    assert probe.read == read
    readiness.on_write_done()
    readiness.start()
    try:
        # The shell found reading with the baseline's own count: the wait it is in began
        # before the write, so the prompt is not this send's.
        probe.reader_wakes = baseline
        readiness.on_output(True, True, 0, "$ ")
        assert settled == []
        # One wake later, the wait is new: the prompt settles the send.
        probe.reader_wakes = baseline + 1
        readiness.on_output(True, False, None, "$ ")
        assert [s.reason for s in settled] == [WaitReason.STDIN_READ]
    finally:
        readiness.stop()
