"""Load: many sessions at once, and many open/close cycles, leaking nothing.

Latency figures are printed (run with ``-s``) for FIGURES.md; they are not asserted here —
timing targets belong to ``bench/``. What is asserted is correctness under load: every send
settles on the prompt (``stdin_read``, never silence) with exactly its own output.
"""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest

from ..helpers import full_access
from ._support import child_counts, fd_count, percentile, unique_seconds, with_argv

AGENTS = 8
SESSIONS_PER_AGENT = 8
SENDS = 100


@pytest.mark.slow
async def test_64_concurrent_sessions_x_100_sends_each_see_only_their_own_output() -> None:
    async with Harness(config=full_access()) as h:
        agents = [h.create_agent(f"load-{n}") for n in range(AGENTS)]

        async def open_for(agent: Agent) -> tuple[Agent, str]:
            opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            assert not opened.is_error, opened.text
            return agent, opened.value["sessionId"]

        started = time.perf_counter()
        sessions = await asyncio.gather(
            *(open_for(agent) for agent in agents for _ in range(SESSIONS_PER_AGENT))
        )
        open_seconds = time.perf_counter() - started
        assert len({sid for _, sid in sessions}) == AGENTS * SESSIONS_PER_AGENT
        nonce = secrets.token_hex(4)
        latencies: list[float] = []

        async def drive(agent: Agent, sid: str) -> None:
            for i in range(SENDS):
                token = f"tok-{nonce}-{sid}-{i}"
                began = time.perf_counter()
                result = await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": f"echo {token}"}
                )
                latencies.append(time.perf_counter() - began)
                value = result.value
                assert not result.is_error, result.text
                assert (value["waitReason"], value["viewport"], value["exitCode"]) == (
                    "stdin_read",
                    f"{token}\n",
                    0,
                ), (sid, i, value)

        started = time.perf_counter()
        await asyncio.gather(*(drive(agent, sid) for agent, sid in sessions))
        send_seconds = time.perf_counter() - started

        # Scrollbacks hold exactly their own session's tokens, all of them, in order.
        for agent, sid in sessions:
            page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=1, count=10_000)).text
            mine = [line for line in page.splitlines() if line.startswith(f"tok-{nonce}-")]
            assert mine == [f"tok-{nonce}-{sid}-{i}" for i in range(SENDS)]

        started = time.perf_counter()
        await asyncio.gather(*(agent.dispose() for agent in agents))
        close_seconds = time.perf_counter() - started

    assert len(latencies) == AGENTS * SESSIONS_PER_AGENT * SENDS
    print(
        f"\nFIGURE load: {len(sessions)} sessions x {SENDS} sends = {len(latencies)} sends; "
        f"open all {open_seconds:.2f}s; sends {send_seconds:.2f}s "
        f"({len(latencies) / send_seconds:.0f}/s); "
        f"send p50 {percentile(latencies, 0.5) * 1000:.1f} ms, "
        f"p99 {percentile(latencies, 0.99) * 1000:.1f} ms, "
        f"max {max(latencies) * 1000:.1f} ms; dispose all {close_seconds:.2f}s"
    )


CYCLES = 500


@pytest.mark.slow
async def test_500_open_close_cycles_through_the_tools_leak_nothing() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("cycler")
        # One warm-up cycle so lazily created loop resources are not counted as leaks.
        warm = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        await h.call_tool(agent, "terminal_close", {"sessionId": warm.value["sessionId"]})
        fds, (live, zombies) = fd_count(), child_counts()
        tag = unique_seconds()
        started = time.perf_counter()
        for cycle in range(CYCLES):
            opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            assert not opened.is_error, (cycle, opened.text)
            sid = opened.value["sessionId"]
            if cycle % 50 == 0:
                # Now and then leave work behind for teardown: a background job.
                await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": f"sleep {tag} &"}
                )
            closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            assert closed.value == {"closed": True}, (cycle, closed.text)
        elapsed = time.perf_counter() - started
        assert (await h.call_tool(agent, "terminal_list", {})).value == {"sessions": []}
        assert fd_count() == fds, "file descriptors leaked"
        assert child_counts() == (live, zombies), "processes or zombies left behind"
        assert with_argv(f"sleep {tag}") == []
    print(
        f"\nFIGURE cycles: {CYCLES} open/close cycles in {elapsed:.2f}s "
        f"({elapsed / CYCLES * 1000:.1f} ms per cycle); fds {fds} -> {fd_count()}, "
        f"children/zombies {live}/{zombies} -> {child_counts()[0]}/{child_counts()[1]}"
    )
