"""``ctx.pty.wait``: event-driven waiting on the tail cursor for a line that matches."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.errors import DshError
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access


async def _open(h: Harness, agent: object, command: str = "true") -> str:
    opened = await h.ctx.pty.open(agent, {"command": command})
    h.ctx.pty.tail(agent, opened.session_id, 100000)  # start the cursor after the setup
    return opened.session_id


async def test_wait_returns_the_lines_through_the_match_and_keeps_the_rest() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        await h.ctx.pty.send(agent, sid, {"data": "printf 'a\\nDONE-1\\nb\\nDONE-2\\n'"})
        first = await h.ctx.pty.wait(agent, sid, re.compile(r"^DONE-\d$"), 5000)
        assert first.reason == "match"
        assert first.matched == "DONE-1"
        assert first.text.endswith("a\nDONE-1\n")
        assert "b\n" not in first.text
        second = await h.ctx.pty.wait(agent, sid, re.compile(r"^DONE-\d$"), 5000)
        assert (second.reason, second.matched, second.text) == ("match", "DONE-2", "b\nDONE-2\n")
        # The cursor is shared with tail: nothing is returned twice.
        assert "DONE" not in h.ctx.pty.tail(agent, sid).text
        await agent.dispose()


async def test_wait_wakes_on_output_that_arrives_later(tmp_path: Path) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        gate = str(tmp_path / "gate")
        await h.ctx.pty.send(
            agent,
            sid,
            {"data": f"rm -f {gate}; mkfifo {gate}; read x < {gate}; echo got-$x; rm -f {gate}"},
        )
        waiter = asyncio.create_task(h.ctx.pty.wait(agent, sid, re.compile("^got-"), 20000))
        await asyncio.sleep(0)
        assert not waiter.done()
        with open(gate, "w") as fifo:
            fifo.write("now\n")
        result = await waiter
        assert result.reason == "match" and result.matched == "got-now"
        await agent.dispose()


async def test_wait_times_out_with_what_arrived_and_ends_on_exit() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        await h.ctx.pty.send(agent, sid, {"data": "echo one"})
        started = asyncio.get_running_loop().time()
        timed = await h.ctx.pty.wait(agent, sid, re.compile("^never$"), 300)
        assert timed.reason == "timeout" and timed.matched is None
        assert asyncio.get_running_loop().time() - started >= 0.3
        assert "one\n" in timed.text
        await h.ctx.pty.send(agent, sid, {"data": "echo bye; exit 3"})
        ended = await h.ctx.pty.wait(agent, sid, re.compile("^never$"), 20000)
        assert ended.reason == "exit"
        assert ended.status.kind == "exited" and ended.status.exit_code == 3
        assert "bye\n" in ended.text
        await agent.dispose()


async def test_wait_ends_when_the_session_is_closed_under_it() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        waiter = asyncio.create_task(h.ctx.pty.wait(agent, sid, "^never$", 60000))
        await asyncio.sleep(0)
        assert await h.ctx.pty.close(agent, sid)
        result = await asyncio.wait_for(waiter, 10)
        assert result.reason == "exit"


async def test_partial_matches_a_prompt_still_waiting_on_its_line_without_consuming_it() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        await h.ctx.pty.send(agent, sid, {"data": "read -r -p 'Secret word: ' w; echo got-$w"})
        # Complete lines only: the prompt has no newline, so a plain wait does not see it.
        plain = await h.ctx.pty.wait(agent, sid, re.compile("^Secret word"), 200)
        assert plain.reason == "timeout"
        assert plain.open_line.endswith("Secret word: ")
        seen = await h.ctx.pty.wait(agent, sid, re.compile("^Secret word: $"), 5000, partial=True)
        assert seen.reason == "match" and seen.matched_open
        assert seen.matched is not None and seen.matched.endswith("Secret word: ")
        await h.ctx.pty.send(agent, sid, {"data": "xyzzy"})
        done = await h.ctx.pty.wait(agent, sid, re.compile("^got-"), 5000)
        assert done.matched == "got-xyzzy"
        assert "Secret word: xyzzy\n" in done.text  # the prompt line, once complete
        await agent.dispose()


async def test_lines_keeps_the_newest_and_says_truncated() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        await h.ctx.pty.send(agent, sid, {"data": "seq 1 50; echo END"})
        result = await h.ctx.pty.wait(agent, sid, re.compile("^END$"), 5000, lines=3)
        assert result.text == "49\n50\nEND\n" and result.truncated
        await agent.dispose()


async def test_a_match_racing_the_output_is_never_missed_or_split() -> None:
    """Lines arrive in any chunking; the matching line is found once, whole, each time."""
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        sid = await _open(h, agent)
        for i in range(60):
            waiter = asyncio.create_task(
                h.ctx.pty.wait(agent, sid, re.compile(rf"^mark-{i}$"), 20000)
            )
            await h.ctx.pty.send(
                agent, sid, {"data": f"printf 'x%.0s' $(seq 1 {i}); echo; echo mark-{i}"}
            )
            result = await waiter
            assert result.reason == "match", result
            assert result.text.endswith(f"{'x' * i}\nmark-{i}\n")
        await agent.dispose()


async def test_bad_arguments_and_foreign_owners_are_refused() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("w")
        other = h.create_agent("other")
        sid = await _open(h, agent)
        with pytest.raises(DshError) as foreign:
            await h.ctx.pty.wait(other, sid, "x", 100)
        assert foreign.value.code == "FOREIGN_SESSION"
        for bad in [("(", 100), ("x", -1), ("x", True), (re.compile(b"x"), 100)]:
            with pytest.raises(DshError) as caught:
                await h.ctx.pty.wait(agent, sid, *bad)  # type: ignore[arg-type]
            assert caught.value.code == "INVALID_ARGUMENT"
        with pytest.raises(DshError) as caught:
            await h.ctx.pty.wait(agent, sid, "x", 100, lines=0)
        assert caught.value.code == "INVALID_ARGUMENT"
        await agent.dispose()
