"""Programs that wait for keys together with other processes settle exactly (SPEC §28).

mc with its subshell, tmux and GNU screen nested in the session: each waits on the
terminal (or leaves it to a process it talks to) next to a channel to another process —
a terminal of its own, a socket to a server. The exact tier judges the whole set
(``provider/partners.py``); these are the real programs in real screen sessions, with
production timing defaults. Each must settle ``stdin_read`` (before, the silence tier
answered ``inferred_idle`` after 3 s), and must never do so while a command typed into
it is still running: ``sleep 0.9; echo N > file`` settles only with the file written (a sleep
shorter than a second is a wait that ends by itself, never quiet).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import call_value, full_access, needs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

BUDGET_MS = 15_000
ROUNDS = 4
_TAG = f"dsh-partners-{os.getpid()}"


async def _send(h: Harness, agent: Agent, sid: str, **args: Any) -> dict[str, Any]:
    return await call_value(
        h, agent, "terminal_send", {"sessionId": sid, "timeoutMs": BUDGET_MS, **args}
    )


@pytest.fixture
async def session() -> AsyncIterator[tuple[Harness, Agent, str]]:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = await call_value(h, agent, "terminal_open", {"screen": True})
        yield h, agent, str(opened["sessionId"])


@pytest.fixture
def tmux_server() -> Iterator[str]:
    """A tmux socket name of this test's own; its server is killed after the test."""
    name = f"{_TAG}-tmux"
    try:
        yield name
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, check=False)


@pytest.fixture
def screen_name() -> Iterator[str]:
    name = f"{_TAG}-screen"
    try:
        yield name
    finally:
        subprocess.run(["screen", "-S", name, "-X", "quit"], capture_output=True, check=False)


async def _exactly_and_never_early(
    h: Harness,
    agent: Agent,
    sid: str,
    tmp_path: Path,
    start: dict[str, Any],
    key: dict[str, Any],
    quit_: dict[str, Any],
) -> None:
    """Start the program, press a key, run a command in it ``ROUNDS`` times, quit.

    Each start and key settles ``stdin_read`` with no exit code; a command typed into the
    program's shell settles ``stdin_read`` only once it has run (its file is written);
    otherwise (the rule could not prove it) by silence. Quitting returns to the prompt.
    """
    shown = await _send(h, agent, sid, **start)
    assert (shown["waitReason"], shown["exitCode"]) == ("stdin_read", None), shown
    moved = await _send(h, agent, sid, **key)
    assert moved["waitReason"] == "stdin_read", moved
    reasons = []
    for i in range(ROUNDS):
        mark = tmp_path / f"mark{i}"
        ran = await _send(h, agent, sid, text=f"sleep 0.9; echo {i} > {mark}")
        reasons.append(ran["waitReason"])
        if ran["waitReason"] == "stdin_read":
            assert mark.exists(), f"round {i}: stdin_read before the command ran"
        else:
            assert ran["waitReason"] == "inferred_idle", ran
        # The next round starts from the program waiting again, whatever settled this one.
        for _ in range(50):
            if mark.exists():
                break
            await asyncio.sleep(0.1)
    assert "stdin_read" in reasons, reasons
    left = await _send(h, agent, sid, **quit_)
    if left["exitCode"] is None:
        left = await _send(h, agent, sid, text="", submit=False)
    assert (left["waitReason"], left["exitCode"]) == ("stdin_read", 0), left


@needs("mc")
async def test_mc_with_its_subshell(session: tuple[Harness, Agent, str], tmp_path: Path) -> None:
    h, agent, sid = session
    await _exactly_and_never_early(
        h, agent, sid, tmp_path, {"text": "mc"}, {"keys": ["Down"]}, {"keys": ["F10"]}
    )


@needs("tmux")
async def test_nested_tmux(
    session: tuple[Harness, Agent, str], tmp_path: Path, tmux_server: str
) -> None:
    h, agent, sid = session
    start = {"text": f"tmux -L {tmux_server} -f /dev/null new-session"}
    await _exactly_and_never_early(
        h, agent, sid, tmp_path, start, {"text": "echo hi"}, {"text": "exit"}
    )


@needs("screen")
async def test_nested_screen(
    session: tuple[Harness, Agent, str], tmp_path: Path, screen_name: str
) -> None:
    h, agent, sid = session
    start = {"text": f"screen -q -S {screen_name}"}
    await _exactly_and_never_early(
        h, agent, sid, tmp_path, start, {"text": "echo hi"}, {"text": "exit"}
    )
