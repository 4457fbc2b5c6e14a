"""Wait reasons for programs that wait on the terminal and on something else, end to end.

Real bash sessions through ``terminal_send`` with the production timing defaults. A
program waiting on the terminal *and* a network connection (the shape of ``ssh``,
``docker exec -it``, ``kubectl exec -it``) may be waiting for the network, so its send
settles by silence or deadline; REPLs whose other wake-ups are their own event
descriptors still settle ``stdin_read``.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

WAITER = str(Path(__file__).parents[1] / "fixtures" / "waiter.py")
NOT_PROOF = {"inferred_idle", "timeout"}
SESSIONS = 10
ROUNDS = 5  # SESSIONS x ROUNDS sends of the network-shaped wait


async def _send(h: Harness, agent: Agent, sid: str, text: str) -> dict[str, Any]:
    result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": text})
    assert not result.is_error, result.text
    value: dict[str, Any] = result.value
    return value


async def _open(h: Harness, agent: Agent) -> str:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


async def _interrupt(h: Harness, agent: Agent, sid: str, token: str) -> None:
    """SIGINT the foreground program, then prove the shell is back and in step."""
    signalled = await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
    assert not signalled.is_error, signalled.text
    back = await _send(h, agent, sid, f"echo {token}")
    assert back["waitReason"] == "stdin_read", back
    assert back["viewport"].endswith(f"{token}\n"), back


@pytest.fixture
async def slow_server() -> AsyncIterator[int]:
    """A local TCP server that answers each connection after 3 s, then stays open."""

    async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.sleep(3)
            writer.write(b"remote says hi\n")
            await writer.drain()
            await reader.read()
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


@pytest.mark.slow
async def test_terminal_plus_network_wait_settles_by_silence_not_stdin_read(
    slow_server: int,
) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sids = await asyncio.gather(*(_open(h, agent) for _ in range(SESSIONS)))

        async def _rounds(sid: str) -> list[str]:
            reasons = []
            for round_ in range(ROUNDS):
                sent = await _send(h, agent, sid, f"python3 {WAITER} tcp {slow_server}")
                assert "ready tcp" in sent["viewport"], sent
                assert sent["exitCode"] is None, sent
                reasons.append(sent["waitReason"])
                await _interrupt(h, agent, sid, f"after-{round_}")
            return reasons

        reasons = [r for rs in await asyncio.gather(*(_rounds(sid) for sid in sids)) for r in rs]
    assert len(reasons) == SESSIONS * ROUNDS
    assert set(reasons) <= NOT_PROOF, reasons


@pytest.mark.parametrize(
    ("program", "line", "answer", "leave"),
    [
        pytest.param("python3 -q", "6*7", "42", "quit()", id="python3-q"),
        pytest.param("python3 -q -m asyncio", "6*7", "42", "exit()", id="python3-asyncio"),
        pytest.param("node -i", "6*7", "42", ".exit", id="node-i"),
        pytest.param("gdb -q", "print 6*7", "$1 = 42", "quit", id="gdb-q"),
    ],
)
async def test_repls_on_event_loops_still_settle_stdin_read(
    program: str, line: str, answer: str, leave: str
) -> None:
    if shutil.which(program.split()[0]) is None:
        pytest.skip(f"{program.split()[0]} is not installed")
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        started = await _send(h, agent, sid, program)
        assert started["waitReason"] == "stdin_read", started
        asked = await _send(h, agent, sid, line)
        assert asked["waitReason"] == "stdin_read", asked
        assert answer in asked["viewport"], asked
        left = await _send(h, agent, sid, leave)
        assert (left["waitReason"], left["exitCode"]) == ("stdin_read", 0), left


async def test_read_with_a_five_second_timeout_is_waiting_for_input() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        asked = await _send(h, agent, sid, "read -t 5 x; echo got-$x")
        assert (asked["waitReason"], asked["exitCode"]) == ("stdin_read", None), asked
        answered = await _send(h, agent, sid, "value")
        assert (answered["waitReason"], answered["exitCode"]) == ("stdin_read", 0), answered
        assert "got-value" in answered["viewport"], answered


@pytest.mark.parametrize(
    ("args", "reasons"),
    [
        # Idle between its 100 ms polls: waiting for keys once it keeps coming back (§19.1).
        pytest.param("timeout 100 poll", {"stdin_read"}, id="poll-100ms"),
        pytest.param("childpipe", NOT_PROOF, id="pipe-from-child"),
        pytest.param("selfpipe", {"stdin_read"}, id="self-pipe"),
        pytest.param("socketpair", {"stdin_read"}, id="self-socketpair"),
    ],
)
async def test_wait_shapes_through_terminal_send(args: str, reasons: set[str]) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        sent = await _send(h, agent, sid, f"python3 {WAITER} {args}")
        assert f"ready {args.split()[0]}" in sent["viewport"], sent
        assert sent["waitReason"] in reasons, sent
        await _interrupt(h, agent, sid, "shell-back")
