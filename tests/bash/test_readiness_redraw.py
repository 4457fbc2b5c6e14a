"""Programs that redraw on a clock and never read keys settle ``periodic`` (SPEC §28).

Real programs through ``terminal_send``, production timing defaults: ``watch -n 1 date``
and ``tail -f`` of a log written on a beat settle ``inferred_idle`` with
``periodic: true`` instead of running out the budget, and keep running. A shell loop
(a new group per command), output at an uneven pace and refreshers that poll their keys
never settle so. The beat rule itself is driven burst by burst with stand-in times.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_bash.periodic import GAP, BurstWatch
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

BUDGET_MS = 10_000


async def _send(h: Harness, agent: Agent, sid: str, **args: Any) -> dict[str, Any]:
    result = await h.call_tool(
        agent, "terminal_send", {"sessionId": sid, "timeoutMs": BUDGET_MS, **args}
    )
    assert not result.is_error, result.text
    assert isinstance(result.value, dict)
    return result.value


async def _open(h: Harness, agent: Agent, *, screen: bool) -> str:
    opened = await h.call_tool(agent, "terminal_open", {"screen": screen})
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


@pytest.mark.skipif(shutil.which("watch") is None, reason="needs watch")
async def test_watch_settles_periodic_and_keeps_running() -> None:
    # In a line session (TERM=dumb) watch draws once and then stays silent: the silence
    # tier settles it there, as before.
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent, screen=True)
        shown = await _send(h, agent, sid, text="watch -n 1 date")
        assert (shown["waitReason"], shown.get("periodic")) == ("inferred_idle", True), shown
        again = await _send(h, agent, sid, text="", submit=False)
        assert (again["waitReason"], again.get("periodic")) == ("inferred_idle", True), again
        stopped = await _send(h, agent, sid, keys=["C-c"])
        assert stopped["waitReason"] == "stdin_read" and stopped["exitCode"] is not None, stopped
        assert "periodic" not in stopped


async def test_tail_f_of_a_log_written_on_a_beat_settles_periodic(tmp_path: Path) -> None:
    log = tmp_path / "busy.log"
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent, screen=False)
        writer = f": > {log}; (while :; do date +%s.%N; sleep 0.3; done) >> {log} 2>&1 &"
        assert (await _send(h, agent, sid, text=writer))["waitReason"] == "stdin_read"
        try:
            shown = await _send(h, agent, sid, text=f"tail -f {log}")
            assert (shown["waitReason"], shown.get("periodic")) == ("inferred_idle", True), shown
            stopped = await _send(h, agent, sid, keys=["C-c"])
            assert (stopped["waitReason"], stopped["exitCode"]) == ("stdin_read", 130), stopped
        finally:
            done = await _send(h, agent, sid, text="kill %1; wait")
            assert done["waitReason"] == "stdin_read", done


@pytest.mark.parametrize(
    "command",
    [
        # A new group for every command: the beat comes from the shell, not a program.
        pytest.param("for i in 1 2 3 4 5 6; do date +%N; sleep 0.3; done", id="shell-loop"),
        # One program, printing at an uneven pace.
        pytest.param(
            "python3 -c 'import time; [(print(p, flush=True), time.sleep(p))"
            " for p in (0.1, 0.5, 0.12, 0.6, 0.1, 0.5)]'",
            id="uneven",
        ),
    ],
)
async def test_output_without_a_program_beat_runs_to_its_prompt(command: str) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent, screen=False)
        for _ in range(3):
            done = await _send(h, agent, sid, text=command)
            assert (done["waitReason"], done["exitCode"]) == ("stdin_read", 0), done
            assert "periodic" not in done


# -- the rule, burst by burst ------------------------------------------------------------

GROUP = 4321


def _watch(period: float, bursts: int, *, burst_len: float = 0.005) -> tuple[BurstWatch, float]:
    """Bursts ``period`` apart (the first at 0), each ``burst_len`` long; the last output."""
    watch = BurstWatch(0.0)
    last = burst_len
    for i in range(1, bursts):
        start = i * period
        watch.output(start, last, lambda: GROUP)
        last = start + burst_len
    return watch, last


def test_three_bursts_on_a_beat_are_periodic_once_the_last_is_over() -> None:
    watch, last = _watch(1.0, 3)
    assert watch.steady_group(last + GAP / 2, last) is None  # still in the burst
    assert watch.steady_group(last + GAP + 1e-6, last) == GROUP


def test_an_echo_alone_is_not_the_first_burst() -> None:
    # A program whose start-up takes its period: the echo at 0, its lines at 1 and 2.
    watch = BurstWatch(0.0)
    watch.output(1.0, 0.0002, lambda: GROUP)
    watch.output(2.0, 1.001, lambda: GROUP)
    assert watch.steady_group(3.0, 2.001) is None
    watch.output(3.0, 2.001, lambda: GROUP)
    assert watch.steady_group(3.1, 3.001) == GROUP


def test_two_bursts_are_not_a_beat() -> None:
    watch, last = _watch(1.0, 2)
    assert watch.steady_group(last + 1, last) is None


@pytest.mark.parametrize(
    ("first", "second"),
    [(0.3, 0.6), (0.05, 0.05), (1.0, 0.5)],
    ids=["slowing", "too-fast", "speeding"],
)
def test_an_uneven_or_too_fast_beat_is_not_periodic(first: float, second: float) -> None:
    watch = BurstWatch(0.0)
    watch.output(first, 0.001, lambda: GROUP)
    watch.output(first + second, first + 0.001, lambda: GROUP)
    last = first + second + 0.001
    assert watch.steady_group(last + 1, last) is None


def test_a_long_burst_is_not_a_redraw() -> None:
    watch, last = _watch(1.0, 3, burst_len=0.6)
    assert watch.steady_group(last + 1, last) is None


def test_bursts_from_different_groups_are_not_one_program() -> None:
    watch = BurstWatch(0.0)
    watch.output(1.0, 0.001, lambda: GROUP)
    watch.output(2.0, 1.001, lambda: GROUP + 1)
    assert watch.steady_group(3.0, 2.001) is None


def test_output_without_a_gap_is_the_same_burst() -> None:
    watch = BurstWatch(0.0)
    for i in range(1, 100):  # a stream: every 10 ms
        watch.output(i * 0.01, (i - 1) * 0.01, lambda: GROUP)
    assert watch.steady_group(2.0, 0.99) is None
