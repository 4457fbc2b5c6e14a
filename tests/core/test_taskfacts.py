"""The wake count: the number the readiness fences compare to tell a new wait from an old one."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from dsh_terminal_core.provider.taskfacts import (
    quietly_asleep,
    ran_since,
    run_stamp,
    wake_count,
    wakes_in,
)

LINUX = sys.platform.startswith("linux")
_ECHO_LINES = "import sys\nfor line in sys.stdin: print(line, end='', flush=True)"


def test_a_run_with_no_cpu_time_accounted_still_moves_the_count() -> None:
    # In a virtual machine the task clock stands still while stolen time is paid back:
    # the shell woke, ran and blocked again (one more time slice), with no CPU time added.
    before = wakes_in(b"1500000 200000 40\n")
    after = wakes_in(b"1500000 260000 41\n")
    assert before is not None and after is not None
    assert after > before


def test_a_thread_running_at_the_first_look_moves_the_count_by_its_cpu_time() -> None:
    # Already on the CPU at the first look, then blocked: no new time slice, more CPU time.
    before = wakes_in(b"1500000 200000 40\n")
    after = wakes_in(b"1730000 200000 40\n")
    assert before is not None and after is not None
    assert after > before


def test_the_same_statistics_give_the_same_count() -> None:
    assert wakes_in(b"1500000 200000 40\n") == wakes_in(b"1500000 200000 40\n")


def test_context_switch_counts_are_read_where_there_are_no_statistics() -> None:
    stamp = b"voluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n"
    assert wakes_in(stamp) == 17


@pytest.mark.parametrize("stamp", [b"", b"12 34\n", b"x 1 2\n", b"1 2 y\n"])
def test_unreadable_statistics_give_no_count(stamp: bytes) -> None:
    assert wakes_in(stamp) is None


@pytest.mark.skipif(not LINUX, reason="reads /proc")
def test_a_blocked_process_keeps_its_count_until_it_runs() -> None:
    reader = subprocess.Popen(
        [sys.executable, "-c", _ECHO_LINES],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert reader.stdin is not None and reader.stdout is not None
    try:
        reader.stdin.write("warm\n")
        reader.stdin.flush()
        assert reader.stdout.readline() == "warm\n"
        stamp = _blocked_stamp(reader.pid)
        count = wake_count(reader.pid)
        with open(f"/proc/{reader.pid}/schedstat", "rb") as stats:
            runtime, _delay, slices = (int(field) for field in stats.read().split())
        assert count == runtime + slices
        assert wake_count(reader.pid) == count
        assert not ran_since(reader.pid, stamp)
        reader.stdin.write("ping\n")
        reader.stdin.flush()
        assert reader.stdout.readline() == "ping\n"
        _blocked_stamp(reader.pid)
        moved = wake_count(reader.pid)
        assert moved is not None and count is not None and moved > count
        assert ran_since(reader.pid, stamp)
    finally:
        reader.stdin.close()
        assert reader.wait(timeout=10) == 0
        reader.stdout.close()


def _blocked_stamp(pid: int) -> bytes:
    """The run stamp of ``pid`` once it sleeps and two reads of it agree.

    Polled: nothing signals that a process went back to sleep.
    """
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        first = run_stamp(pid)
        if quietly_asleep(pid) and first is not None and run_stamp(pid) == first:
            return first
        time.sleep(0.001)
    raise AssertionError(f"process {pid} never settled in a wait")
