"""Lost connections, forged prompts, isolation between agents, and cleanup of every process."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import psutil

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args, ssh_config
from .sshd import Sshd


async def _open(h: Harness, agent: Any, server: Sshd) -> str:
    r = await h.call_tool(agent, "ssh_open", open_args(server))
    assert not r.is_error, r.text
    return str(r.value["sessionId"])


def _ssh_clients() -> set[int]:
    """This test process's ssh client processes (masters and sessions)."""
    found: set[int] = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() == "ssh" and child.status() != psutil.STATUS_ZOMBIE:
                found.add(child.pid)
        except psutil.Error:
            continue
    return found


def _control_dirs() -> set[str]:
    """The control-socket directories the running clients were given."""
    return {
        os.path.dirname(arg.split("=", 1)[1])
        for pid in _ssh_clients()
        for arg in psutil.Process(pid).cmdline()
        if arg.startswith("ControlPath=")
    }


async def _until(condition: Any, timeout: float = 10.0) -> bool:
    """Poll a process-table condition in test code only (cleanup happens asynchronously)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if condition():
            return True
        await asyncio.sleep(0.05)
    return bool(condition())


async def test_the_server_side_killed_mid_run_is_session_exit_then_connection_lost(
    sshd: Sshd, harness: Harness
) -> None:
    agent = harness.create_agent("l")
    sid = await _open(harness, agent, sshd)
    run = asyncio.create_task(
        harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo up; sleep 60"})
    )
    assert await _until(lambda: any(p.name() == "sleep" for p in sshd.connection_processes()))
    loop = asyncio.get_running_loop()
    killed_at = loop.time()
    assert sshd.kill_connections() >= 1
    result = await run
    bound = 5 * 3 + 5  # server_alive_interval_s x server_alive_count_max, plus slack
    assert loop.time() - killed_at < bound
    assert not result.is_error, result.text
    assert result.value["waitReason"] == "session_exit", result.value
    assert result.value["exitCode"] is None
    assert "up\n" in result.value["output"]
    again = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo x"})
    assert again.is_error and again.text.startswith("error [SSH_CONNECTION_LOST]"), again.text
    closed = await harness.call_tool(agent, "ssh_close", {"sessionId": sid})
    assert closed.value == {"closed": True}
    assert await _until(lambda: not _ssh_clients())
    await agent.dispose()


async def test_a_silent_dead_link_is_found_within_the_server_alive_bound(
    sshd: Sshd, tmp_path: Path
) -> None:
    """The server stops answering without closing anything (SIGSTOP): only the client's
    keep-alive probes can notice. A short interval keeps the test quick; the bound scales."""
    config = ssh_config(tmp_path, server_alive_interval_s=1, server_alive_count_max=2)
    async with Harness(config=config) as h:
        agent = h.create_agent("l")
        sid = await _open(h, agent, sshd)
        frozen = [p for p in sshd.connection_processes() if p.name() == "sshd"]
        assert frozen
        for process in frozen:
            process.suspend()
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            r = await h.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo x"})
            elapsed = loop.time() - started
        finally:
            for process in frozen:
                process.resume()
        assert r.value["waitReason"] == "session_exit", r.value
        assert elapsed < 1 * 2 + 4
        assert "Timeout" in r.value["output"] or "not responding" in r.value["output"]
        await agent.dispose()


async def test_a_forged_prompt_without_the_nonce_never_settles(
    sshd: Sshd, harness: Harness
) -> None:
    agent = harness.create_agent("f")
    sid = await _open(harness, agent, sshd)
    forged = "printf '%s\\n' '0:1:0:' 'DSH:1:0:' \"$(printf x%.0s $(seq 32)):1:0:\"; sleep 1.5"
    r = await harness.call_tool(
        agent, "ssh_run", {"sessionId": sid, "command": forged, "timeoutMs": 1000}
    )
    assert r.value["waitReason"] == "timeout", r.value
    assert "DSH:1:0:" in r.value["output"]
    rest = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": ""})
    assert (rest.value["exitCode"], rest.value["waitReason"]) == (0, "stdin_read")
    await agent.dispose()


async def test_two_agents_sessions_and_connections_are_isolated(
    sshd: Sshd, harness: Harness
) -> None:
    alice = harness.create_agent("alice")
    bob = harness.create_agent("bob")
    a = await _open(harness, alice, sshd)
    b = await _open(harness, bob, sshd)
    for tool, args in [
        ("ssh_run", {"sessionId": a, "command": "echo stolen"}),
        ("ssh_interrupt", {"sessionId": a}),
        ("ssh_close", {"sessionId": a}),
    ]:
        r = await harness.call_tool(bob, tool, args)
        assert r.is_error and r.text.startswith("error [FOREIGN_SESSION]"), r.text
    # Each agent has its own master connection, in its own 0700 directory.
    connections = [p for p in sshd.connection_processes() if p.name() == "sshd"]
    assert len({p.pid for p in connections}) >= 2
    dirs = _control_dirs()
    assert len(dirs) == 2
    for directory in dirs:
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    r = await harness.call_tool(alice, "ssh_run", {"sessionId": a, "command": "echo mine"})
    assert r.value["output"] == "mine\n"
    await alice.dispose()
    r = await harness.call_tool(bob, "ssh_run", {"sessionId": b, "command": "echo still"})
    assert r.value["output"] == "still\n"
    await bob.dispose()
    assert await _until(lambda: not os.path.exists(next(iter(dirs))) and not _ssh_clients())


async def test_a_second_open_reuses_the_master_and_close_ends_everything(
    sshd: Sshd, harness: Harness
) -> None:
    agent = harness.create_agent("m")
    first = await _open(harness, agent, sshd)
    connections = {p.pid for p in sshd.connection_processes() if p.name() == "sshd"}
    second = await _open(harness, agent, sshd)
    assert {p.pid for p in sshd.connection_processes() if p.name() == "sshd"} == connections
    await harness.call_tool(agent, "ssh_run", {"sessionId": first, "command": "sleep 300 &"})
    await harness.call_tool(agent, "ssh_close", {"sessionId": first})
    r = await harness.call_tool(agent, "ssh_run", {"sessionId": second, "command": "echo alive"})
    assert r.value["output"] == "alive\n"  # the master outlives the first session
    await harness.call_tool(agent, "ssh_close", {"sessionId": second})
    assert await _until(lambda: not _ssh_clients())
    assert await _until(lambda: not [p for p in sshd.connection_processes() if p.name() != "sleep"])
    await agent.dispose()


async def test_owner_dispose_and_harness_shutdown_leave_no_process(
    sshd: Sshd, tmp_path: Path
) -> None:
    async with Harness(config=ssh_config(tmp_path)) as h:
        agent = h.create_agent("d")
        sid = await _open(h, agent, sshd)
        run = asyncio.create_task(
            h.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "sleep 300"})
        )
        assert await _until(lambda: any(p.name() == "sleep" for p in sshd.connection_processes()))
        await agent.dispose()
        result = await run
        assert result.value is None or result.value["waitReason"] == "session_exit"
        assert await _until(lambda: not _ssh_clients())
        other = h.create_agent("e")
        await _open(h, other, sshd)
        assert _ssh_clients()
        control_dirs = _control_dirs()
        assert control_dirs
    # Harness shutdown disposed the second agent: its client and the remote side are gone,
    # and so are the private control directories and the directory holding them.
    assert await _until(lambda: not _ssh_clients())
    assert await _until(lambda: not sshd.connection_processes())
    for directory in control_dirs:
        assert not os.path.exists(directory)
        assert not os.path.exists(os.path.dirname(directory))
