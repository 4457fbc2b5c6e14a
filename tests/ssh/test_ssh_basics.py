"""ssh_open / ssh_run / ssh_interrupt / ssh_close against a real OpenSSH server."""

from __future__ import annotations

import asyncio
from typing import Any

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args
from .sshd import Sshd


async def _open(h: Harness, agent: Any, server: Sshd, **extra: Any) -> str:
    r = await h.call_tool(agent, "ssh_open", open_args(server, **extra))
    assert not r.is_error, r.text
    return str(r.value["sessionId"])


async def _run(h: Harness, agent: Any, sid: str, command: str, **extra: Any) -> dict[str, Any]:
    r = await h.call_tool(agent, "ssh_run", {"sessionId": sid, "command": command, **extra})
    assert not r.is_error, r.text
    return dict(r.value)


async def test_open_echo_and_exit_codes(sshd: Sshd, harness: Harness) -> None:
    agent = harness.create_agent("a")
    r = await harness.call_tool(agent, "ssh_open", open_args(sshd))
    assert not r.is_error, r.text
    assert r.value["host"] == sshd.host and r.value["port"] == sshd.port
    assert r.value["user"] == "root"
    implicit = await harness.call_tool(
        agent, "ssh_open", {k: v for k, v in open_args(sshd).items() if k != "user"}
    )
    assert not implicit.is_error, implicit.text
    assert implicit.value["user"] == "root"  # the remote shell says who it is
    assert "dsh test server: authorized use only" in r.value["banner"]
    assert "stty" not in r.value["banner"] and "Permanently added" not in r.value["banner"]
    sid = r.value["sessionId"]
    assert await _run(harness, agent, sid, "echo hello") == {
        "output": "hello\n",
        "exitCode": 0,
        "waitReason": "stdin_read",
        "truncated": False,
    }
    failed = await _run(harness, agent, sid, "false")
    assert (failed["output"], failed["exitCode"]) == ("", 1)
    assert (await _run(harness, agent, sid, "sh -c 'exit 42'"))["exitCode"] == 42
    assert (await _run(harness, agent, sid, "printf 'no newline'"))["output"] == "no newline"
    quoted = await _run(harness, agent, sid, "echo \"it's\" '$HOME' \\\\ `echo x`")
    assert quoted["output"] == "it's $HOME \\ x\n"
    closed = await harness.call_tool(agent, "ssh_close", {"sessionId": sid})
    assert closed.value == {"closed": True}
    again = await harness.call_tool(agent, "ssh_close", {"sessionId": sid})
    assert again.value == {"closed": False}
    await agent.dispose()


async def test_cwd_and_variables_persist_and_multiline_commands_run_whole(
    sshd: Sshd, harness: Harness
) -> None:
    agent = harness.create_agent("a")
    sid = await _open(harness, agent, sshd)
    await _run(harness, agent, sid, "cd /tmp && export DSH_VAR=kept && LOCAL=also")
    r = await _run(harness, agent, sid, "pwd; echo $DSH_VAR $LOCAL")
    assert r["output"] == "/tmp\nkept also\n"
    r = await _run(harness, agent, sid, "cat <<'END'\nline one\n  line two\nEND\nfalse")
    assert (r["output"], r["exitCode"]) == ("line one\n  line two\n", 1)
    await agent.dispose()


async def test_a_two_second_command_returns_after_it_finishes(sshd: Sshd, harness: Harness) -> None:
    agent = harness.create_agent("a")
    sid = await _open(harness, agent, sshd)
    loop = asyncio.get_running_loop()
    started = loop.time()
    r = await _run(harness, agent, sid, "echo begin; sleep 2; echo end")
    assert loop.time() - started >= 2.0
    assert (r["output"], r["exitCode"], r["waitReason"]) == ("begin\nend\n", 0, "stdin_read")
    await agent.dispose()


async def test_a_megabyte_of_output_comes_back_whole(sshd: Sshd, harness: Harness) -> None:
    agent = harness.create_agent("a")
    sid = await _open(harness, agent, sshd)
    command = "head -c 1000000 /dev/zero | tr '\\0' x | fold -w 200; echo"
    r = await harness.call_tool(agent, "ssh_run", {"sessionId": sid, "command": command})
    assert not r.is_error
    assert r.value["exitCode"] == 0 and not r.value["truncated"]
    lines = r.value["output"].split("\n")
    assert lines[-1] == "" and len(lines) == 5001
    assert all(line == "x" * 200 for line in lines[:-1])
    assert len(r.text.encode()) <= 262144  # the model-facing text stays bounded
    await agent.dispose()
