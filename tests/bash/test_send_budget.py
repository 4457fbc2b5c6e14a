"""A time budget per send, and waiting for the running command without typing."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.errors import ConfigError, TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, WaitReason

from ..helpers import full_access, harness, open_shell, send

ROUNDS = 50
STDIN = WaitReason.STDIN_READ


async def test_timeout_ms_bounds_one_send_only() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        loop = asyncio.get_running_loop()
        started = loop.time()
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30", timeout_ms=150))
        result = await op.done
        assert result.wait_reason is WaitReason.TIMEOUT
        assert 0.14 <= loop.time() - started < 2.0
        await h.ctx.terminals.signal(agent, sid, "SIGINT")
        after = await send(h, agent, sid, "echo budget-over")
        assert (after.wait_reason, after.exit_code) == (STDIN, 0)
        # The interrupted command's prompt may arrive after this send's write began.
        assert after.viewport.endswith("budget-over\n"), after.viewport


async def test_a_send_that_fails_after_reserving_the_session_ends_at_its_deadline() -> None:
    # Whatever fails between the reservation and the write, the send's deadline is armed:
    # the session is busy only until then, never for good.
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        process = h.ctx.terminals.get_session(agent, sid)._process

        def broken_drain() -> None:
            raise RuntimeError("the terminal failed while the send was being typed")

        process.drain_output, working = broken_drain, process.drain_output
        with pytest.raises(RuntimeError):
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo x", timeout_ms=200))
        process.drain_output = working
        with pytest.raises(TerminalError) as busy:
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo y"))
        assert busy.value.code == "SEND_ACTIVE"
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            try:
                op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo free-again"))
                break
            except TerminalError as exc:
                assert exc.code == "SEND_ACTIVE"
                assert asyncio.get_running_loop().time() < deadline, "the session stayed busy"
                await asyncio.sleep(0.05)
        result = await op.done
        assert (result.wait_reason, result.exit_code) == (STDIN, 0)
        assert result.viewport.endswith("free-again\n"), result.viewport


@pytest.mark.parametrize("value", [0, -1, 600_001, True, 1.5, "100"])
async def test_timeout_ms_out_of_range_is_invalid_and_sends_nothing(value: object) -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        with pytest.raises(TerminalError) as info:
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo no", timeout_ms=value))  # type: ignore[arg-type]
        assert info.value.code == "INVALID_ARGUMENT"
        assert "timeoutMs" in str(info.value)
        # Nothing was typed and the session is free for the next send.
        result = await send(h, agent, sid, "echo yes")
        assert result.viewport == "yes\n"


async def test_timeout_ms_through_the_tool() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]
        fast = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "sleep 30", "timeoutMs": 100}
        )
        assert not fast.is_error and fast.value["waitReason"] == "timeout"
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        for bad in (0, 600_001, "5"):
            refused = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo x", "timeoutMs": bad}
            )
            assert refused.is_error and "INVALID_ARGUMENT" in refused.text, refused.text
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})


def test_max_timeout_ms_must_cover_the_default() -> None:
    async def load() -> None:
        config = full_access(**{"terminal-bash": {"timeout_ms": 5000, "max_timeout_ms": 1000}})
        await Harness(config=config).start()

    with pytest.raises(ConfigError) as info:
        asyncio.run(load())
    assert "max_timeout_ms (1000) must be >= timeout_ms (5000)" in str(info.value)


async def test_empty_wait_on_an_idle_shell_settles_at_once_with_the_last_exit_code() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(ROUNDS):
            await send(h, agent, sid, f"(exit {i % 5})")
            loop = asyncio.get_running_loop()
            started = loop.time()
            result = await send(h, agent, sid, "", submit=False)
            assert loop.time() - started < 1.0
            assert (result.wait_reason, result.exit_code) == (STDIN, i % 5), (i, result)
            assert result.viewport == "", (i, result.viewport)


async def test_empty_wait_settles_when_the_running_command_ends(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(ROUNDS):
            text = f"read -r _ < {gate}; echo built-{i}; (exit 2)"
            started = h.ctx.terminals.start_send(agent, sid, SendRequest(text=text, timeout_ms=30))
            assert (await started.done).wait_reason is WaitReason.TIMEOUT
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="", submit=False))
            await asyncio.to_thread(gate.write_text, "go\n")
            result = await op.done
            assert (result.wait_reason, result.exit_code) == (STDIN, 2), (i, result)
            assert f"built-{i}" in result.viewport.split("\n"), (i, result.viewport)


async def test_empty_wait_on_an_idle_repl_settles_on_its_read() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        opened = await send(h, agent, sid, "python3 -q -i")
        assert opened.wait_reason is STDIN
        result = await send(h, agent, sid, "", submit=False)
        assert (result.wait_reason, result.exit_code) == (STDIN, None)
        await send(h, agent, sid, "exit()")
