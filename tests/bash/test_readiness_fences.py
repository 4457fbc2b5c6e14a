"""The write fence and the consumption fence, each flow repeated to catch a rare race.

Every flow here settled wrongly on the first release in a few percent of iterations, so
each runs at least 50 times on one shell and asserts, every time, the exact wait reason,
the exit code and that the output belongs to the command that was sent. Timing defaults
are the production ones; only the send budget is short, because these flows start from a
send that timed out (``timeout_ms`` is what they are about).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SendResult, WaitReason

from ..helpers import harness, open_shell, send
from ..shells import (  # noqa: F401  (every test runs for each shell)
    each_shell,
    exit_with,
    rounds,
    status_var,
)

ROUNDS = 50
# A short budget for the command that must time out (its own timeoutMs, so a shell's
# startup keeps the backend's: fish's takes longer than this).
SHORT_MS = 200


def _last_line(viewport: str) -> str:
    lines = [line for line in viewport.split("\n") if line]
    return lines[-1] if lines else ""


async def _send_within(h: Harness, agent: Agent, sid: str, text: str, ms: int) -> SendResult:
    op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=text, timeout_ms=ms))
    result: SendResult = await op.done
    return result


async def _interrupt_then_send(signal: str) -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            running = await _send_within(h, agent, sid, "sleep 20", SHORT_MS)
            assert running.wait_reason is WaitReason.TIMEOUT, (i, running)
            await h.ctx.terminals.signal(agent, sid, signal)
            after = await send(h, agent, sid, f"echo after-{i}")
            assert (after.wait_reason, after.exit_code) == (WaitReason.STDIN_READ, 0), (i, after)
            assert _last_line(after.viewport) == f"after-{i}", (i, after.viewport)
            # Nothing of the interrupted command's prompt either: exactly this output.
            assert after.viewport == f"after-{i}\n", (i, after.viewport)
            # The interrupted command's status never leaks into a later send either.
            status = await send(h, agent, sid, f"echo {status_var()}")
            assert (status.exit_code, status.viewport) == (0, "0\n"), (i, status)
        # The interrupted prompts went to the scrollback, where they belong.
        page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=1, count=10_000))
        assert page.text.count("after-") >= rounds(ROUNDS)


@pytest.mark.shells("shell", "zsh", "fish")
async def test_send_right_after_sigint_settles_on_its_own_prompt() -> None:
    await _interrupt_then_send("SIGINT")


@pytest.mark.shells("shell", "zsh", "fish")
async def test_send_right_after_sigterm_settles_on_its_own_prompt() -> None:
    await _interrupt_then_send("SIGTERM")


@pytest.mark.local_only
@pytest.mark.shells("shell", "zsh", "fish")
async def test_type_ahead_settles_on_the_prompt_after_the_typed_command(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            # The running command waits on a gate, not on the terminal, and ends with 7.
            running = await _send_within(
                h, agent, sid, f"cat {gate} > /dev/null; {exit_with(7)}", SHORT_MS
            )
            assert running.wait_reason is WaitReason.TIMEOUT, (i, running)
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=f"echo second-{i}"))
            # Open the gate once the typed-ahead line is written (inside start_send when
            # the terminal takes it whole, else by the write task); at every such moment
            # the gated command's prompt (exit 7) comes after the write and must not
            # settle it.
            if op.write_task is not None:  # type: ignore[attr-defined]
                await op.write_task  # type: ignore[attr-defined]
            fd = os.open(gate, os.O_WRONLY)
            os.write(fd, b"go\n")
            os.close(fd)
            result = await op.done
            assert (result.wait_reason, result.exit_code) == (WaitReason.STDIN_READ, 0), (i, result)
            assert _last_line(result.viewport) == f"second-{i}", (i, result.viewport)


@pytest.mark.shells("shell", "zsh", "fish")
async def test_multi_line_input_settles_after_its_last_line() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            text = f"echo one-{i}\n{exit_with(3)}\necho three-{i}; {exit_with(4)}"
            result = await send(h, agent, sid, text)
            assert (result.wait_reason, result.exit_code) == (WaitReason.STDIN_READ, 4), (i, result)
            assert _last_line(result.viewport) == f"three-{i}", (i, result.viewport)
            assert re.search(rf"one-{i}\n", result.viewport), result.viewport


@pytest.mark.local_only
@pytest.mark.shells("shell", "zsh", "fish")
async def test_unread_input_and_wake_counter_are_reported_by_the_provider(
    tmp_path: Path,
) -> None:
    up, gate = tmp_path / "up", tmp_path / "gate"
    os.mkfifo(up)
    os.mkfifo(gate)
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        session = h.ctx.terminals.get_session(agent, sid)
        process = session._process  # type: ignore[attr-defined]
        shell = session.shell_pid  # type: ignore[attr-defined]
        op = h.ctx.terminals.start_send(
            agent, sid, SendRequest(text=f"echo up > {up}; read -r _ < {gate}")
        )
        assert await asyncio.to_thread(up.read_text) == "up\n"  # the command is running
        # The shell waits on the gate: typed input stays queued, unread, and is counted
        # even right after the write (the count flushes the PTY's pending work first).
        await process.write("echo queued\r")
        assert process.unread_input() == len("echo queued\n")
        before = process.wake_count(shell)
        assert isinstance(before, int)
        assert process.flush_input() is True
        assert process.unread_input() == 0
        await asyncio.to_thread(gate.write_text, "go\n")
        result = await op.done
        assert (result.wait_reason, result.exit_code) == (WaitReason.STDIN_READ, 0)
        # The kernel echoed the typed line; flushed, it never ran.
        assert "queued" not in result.viewport.split("\n"), result.viewport
        after = process.wake_count(shell)
        assert after is not None and after > before
        check = await send(h, agent, sid, f"echo {status_var()}")
        assert check.viewport == "0\n"


@pytest.mark.shells("shell", "zsh", "fish")
async def test_send_after_sigint_to_the_idle_shell_runs_whole() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            await send(h, agent, sid, f"true {i}")
            # Bash takes a SIGINT that finds it at a prompt printed for an earlier SIGINT
            # only with its next input, and would then drop that input's first byte.
            for _ in range(1 + i % 2):
                await h.ctx.terminals.signal(agent, sid, "SIGINT")
            after = await send(h, agent, sid, f"echo whole-{i}")
            assert (after.wait_reason, after.exit_code) == (WaitReason.STDIN_READ, 0), (i, after)
            assert _last_line(after.viewport) == f"whole-{i}", (i, after.viewport)
            assert "not found" not in after.viewport, (i, after.viewport)
