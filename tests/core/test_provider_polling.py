"""What a look reports about a program polling its terminal, on real processes.

A wait on the terminal that times out within a second is never proof (``input_waiting``
stays False), but a single-threaded program alone in its group, holding nothing but its
own descriptors, is described as polling (``Foreground.polling``): its timeout, a wake
count that moves each time it comes back, how long it has been busy, and how often it
has written. Anything else that could keep it waiting between polls — a socket, a second
thread, another member of its group — means no such description. Each negative case
first checks that the program really sits in its wait, so "none" never means "not
looked".
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh_terminal_core.provider import Foreground, LocalTerminalProcess
from dsh_terminal_core.provider.inspector import PollingWait

from ..helpers import Output, Spawn, eventually
from .test_provider_waits import WAITER, _blocked_in_wait, waiter

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

POLLER = str(Path(__file__).parents[1] / "fixtures" / "key_poller.py")
LOOKS = 20


def _polling(process: LocalTerminalProcess) -> PollingWait | None:
    seen: Foreground | None = process.inspect_foreground()
    assert seen is not None and not seen.input_waiting, seen
    return seen.polling


@pytest.mark.parametrize("millis", ["100", "1000"])
@pytest.mark.parametrize("call", ["select", "poll", "epoll"])
async def test_a_short_wait_of_a_lone_process_is_reported_as_polling(
    spawn: Spawn, call: str, millis: str
) -> None:
    process, _ = await waiter(spawn, "timeout", millis, call)
    await eventually(lambda: _polling(process) is not None)
    first = _polling(process)
    assert first is not None
    assert (first.pid, first.timeout_ns) == (process.pid, int(millis) * 1_000_000)
    assert first.writes > 0  # it printed "ready timeout"
    # It comes back to the wait: a later look sees the count moved, the busy time grown.
    await eventually(
        lambda: (later := _polling(process)) is not None and later.wakes != first.wakes
    )
    later = _polling(process)
    assert later is not None and later.busy_ns >= first.busy_ns
    assert later.started == first.started


async def test_a_long_wait_is_proof_not_polling(spawn: Spawn) -> None:
    process, _ = await waiter(spawn, "timeout", "3000", "poll")
    await eventually(
        lambda: (seen := process.inspect_foreground()) is not None and seen.input_waiting
    )
    seen = process.inspect_foreground()
    assert seen is not None and seen.polling is None


async def _assert_never_polling(process: LocalTerminalProcess, pid: int) -> None:
    for _ in range(LOOKS):
        await eventually(lambda: _blocked_in_wait(pid))
        assert _polling(process) is None


@pytest.mark.parametrize("mode", ["socket", "threads"])
async def test_a_poller_holding_a_socket_or_a_second_thread_is_not_polling(
    spawn: Spawn, mode: str
) -> None:
    process = await spawn([sys.executable, POLLER, mode, "100"])
    await Output(process).wait_for(b"poller ready")
    await _assert_never_polling(process, process.pid)


async def test_a_poller_that_is_not_its_group_alone_is_not_polling(spawn: Spawn) -> None:
    # The shell leads the group and waits for the pipeline; the poller is a member.
    process = await spawn(["/bin/sh", "-c", f"{sys.executable} {WAITER} timeout 100 poll | cat"])
    await Output(process).wait_for(b"ready timeout")

    def poller() -> int | None:
        for child in Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split():
            if WAITER.encode() in Path(f"/proc/{child}/cmdline").read_bytes():
                return int(child)
        return None

    await eventually(lambda: poller() is not None)
    pid = poller()
    assert pid is not None
    await _assert_never_polling(process, pid)
