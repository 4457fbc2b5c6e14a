"""What the readiness ladder asks the terminal, and when: the stdin-wait tier takes no
group look (a scan of /proc) before a new waiter could count, so a shell's startup,
which has no waiter from before to compare with, costs no look in its first
``exact_probe_after_ms``."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_bash.config import BashConfig
from dsh_terminal_bash.readiness import Readiness, Settlement
from dsh_terminal_core.provider import Foreground

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
