"""Timeouts, ^C on the remote terminal, busy sessions, and the next command after them."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psutil

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args
from .sshd import Sshd


def _ssh_clients() -> set[tuple[int, float]]:
    found: set[tuple[int, float]] = set()
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.name() == "ssh" and child.status() != psutil.STATUS_ZOMBIE:
                found.add((child.pid, child.create_time()))
    return found


async def _session(h: Harness, server: Sshd) -> tuple[Any, str]:
    agent = h.create_agent("i")
    r = await h.call_tool(agent, "ssh_open", open_args(server))
    assert not r.is_error, r.text
    return agent, str(r.value["sessionId"])


async def _call(h: Harness, agent: Any, tool: str, **args: Any) -> Any:
    r = await h.call_tool(agent, tool, args)
    assert not r.is_error, r.text
    return r.value


async def test_timeout_then_interrupt_then_the_next_run_is_correct(
    sshd: Sshd, harness: Harness
) -> None:
    agent, sid = await _session(harness, sshd)
    timed = await _call(
        harness, agent, "ssh_run", sessionId=sid, command="echo started; sleep 30", timeoutMs=500
    )
    assert (timed["waitReason"], timed["exitCode"]) == ("timeout", None)
    assert timed["output"] == "started\n"
    busy = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo no"})
    assert busy.is_error and busy.text.startswith("error [SSH_BUSY]"), busy.text
    clients = _ssh_clients()
    interrupted = await _call(harness, agent, "ssh_interrupt", sessionId=sid)
    assert interrupted == {"delivered": True, "exitCode": 130}
    assert _ssh_clients() == clients  # the ^C went to the remote side, not to a local client
    after = await _call(harness, agent, "ssh_run", sessionId=sid, command="echo next; (exit 3)")
    assert (after["output"], after["exitCode"], after["waitReason"]) == ("next\n", 3, "stdin_read")
    assert await _call(harness, agent, "ssh_interrupt", sessionId=sid) == {"delivered": False}
    await agent.dispose()


async def test_an_interrupt_during_a_run_ends_it_with_130(sshd: Sshd, harness: Harness) -> None:
    agent, sid = await _session(harness, sshd)
    run = asyncio.create_task(
        harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo go; sleep 30"})
    )
    # Interrupt only once the command is known to run: its first line arrived.
    while True:
        value = await _call(harness, agent, "ssh_interrupt", sessionId=sid)
        if value["delivered"]:
            break
        await asyncio.sleep(0.01)
    result = await run
    assert not result.is_error, result.text
    assert (result.value["exitCode"], result.value["waitReason"]) == (130, "stdin_read")
    pwd = await _call(harness, agent, "ssh_run", sessionId=sid, command="echo still-here")
    assert pwd["output"] == "still-here\n"
    await agent.dispose()


async def test_an_empty_command_keeps_waiting_for_the_one_that_timed_out(
    sshd: Sshd, harness: Harness
) -> None:
    agent, sid = await _session(harness, sshd)
    gate = sshd.directory / f"gate-{sid}"
    command = f"echo a; while [ ! -e {gate} ]; do sleep 0.05; done; echo b; (exit 7)"
    first = await _call(harness, agent, "ssh_run", sessionId=sid, command=command, timeoutMs=300)
    assert (first["output"], first["waitReason"]) == ("a\n", "timeout")
    gate.touch()
    rest = await _call(harness, agent, "ssh_run", sessionId=sid, command="", timeoutMs=20000)
    assert (rest["output"], rest["exitCode"], rest["waitReason"]) == ("b\n", 7, "stdin_read")
    empty = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": ""})
    assert empty.is_error and "INVALID_ARGUMENT" in empty.text
    await agent.dispose()


async def test_interrupts_racing_the_end_of_a_command_never_confuse_the_next_one(
    sshd: Sshd, harness: Harness
) -> None:
    """A ^C that lands after the command ended prints a stray prompt; it is never taken
    for the next command's, whichever side of the race each iteration falls on."""
    agent, sid = await _session(harness, sshd)
    for i in range(50):
        run = asyncio.create_task(
            harness.call_tool(
                agent, "ssh_run", {"sessionId": sid, "command": f"sleep 0.0{i % 10}; echo r{i}"}
            )
        )
        await asyncio.sleep(0.005 * (i % 7))
        interrupt = await harness.call_tool(agent, "ssh_interrupt", {"sessionId": sid})
        assert not interrupt.is_error, interrupt.text
        result = await run
        assert not result.is_error, result.text
        assert result.value["exitCode"] in (0, 130), result.value
        check = await _call(harness, agent, "ssh_run", sessionId=sid, command=f"echo check-{i}")
        assert (check["output"], check["exitCode"]) == (f"check-{i}\n", 0), (i, check)
    await agent.dispose()


async def test_bad_commands_are_refused_before_anything_is_typed(
    sshd: Sshd, harness: Harness
) -> None:
    agent, sid = await _session(harness, sshd)
    for command in ["echo \x03", "echo a\rb", "x" * 5000]:
        r = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": command})
        assert r.is_error and r.text.startswith("error [INVALID_ARGUMENT]"), r.text
    tabbed = "[ \"$(printf 'a\\tb')\" = 'a\tb' ] && echo same"
    ok = await _call(harness, agent, "ssh_run", sessionId=sid, command=tabbed)
    assert (ok["output"], ok["exitCode"]) == ("same\n", 0)
    await agent.dispose()


async def test_a_cancelled_run_stops_waiting_and_leaves_the_command_to_interrupt(
    sshd: Sshd, harness: Harness
) -> None:
    from dsh_terminal_core.kernel.cancel import Cancellation

    agent, sid = await _session(harness, sshd)
    cancel = Cancellation()
    run = asyncio.create_task(
        harness.call_tool(
            agent, "ssh_run", {"sessionId": sid, "command": "sleep 30"}, cancel=cancel
        )
    )
    while not any(p.name() == "sleep" for p in sshd.connection_processes()):
        await asyncio.sleep(0.02)
    cancel.cancel()
    result = await asyncio.wait_for(run, 5)
    assert result.is_error and result.text.startswith("error [CANCELLED]"), result.text
    busy = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo x"})
    assert busy.text.startswith("error [SSH_BUSY]"), busy.text
    assert await _call(harness, agent, "ssh_interrupt", sessionId=sid) == {
        "delivered": True,
        "exitCode": 130,
    }
    after = await _call(harness, agent, "ssh_run", sessionId=sid, command="echo back")
    assert after["output"] == "back\n"
    await agent.dispose()
