"""The prompt protocol in a POSIX sh (``/bin/sh -i``, dash on Debian), not only in bash."""

from __future__ import annotations

import asyncio
from typing import Any

from dsh_terminal_core.kernel.harness import Harness

from .conftest import open_args
from .sshd import Sshd


async def _call(h: Harness, agent: Any, tool: str, **args: Any) -> Any:
    r = await h.call_tool(agent, tool, args)
    assert not r.is_error, r.text
    return r.value


async def test_posix_sh_runs_commands_with_exit_codes_and_state(
    sshd: Sshd, harness: Harness
) -> None:
    agent = harness.create_agent("sh")
    opened = await _call(harness, agent, "ssh_open", **open_args(sshd, port=sshd.sh_port))
    sid = opened["sessionId"]
    shell = await _call(harness, agent, "ssh_run", sessionId=sid, command="echo $0")
    assert shell["output"].strip().endswith("sh") and "bash" not in shell["output"]
    r = await _call(harness, agent, "ssh_run", sessionId=sid, command="cd /tmp; X=1; false")
    assert (r["output"], r["exitCode"]) == ("", 1)
    r = await _call(harness, agent, "ssh_run", sessionId=sid, command="pwd; echo $X; printf z")
    assert (r["output"], r["exitCode"]) == ("/tmp\n1\nz", 0)
    timed = await _call(harness, agent, "ssh_run", sessionId=sid, command="sleep 30", timeoutMs=300)
    assert timed["waitReason"] == "timeout"
    assert await _call(harness, agent, "ssh_interrupt", sessionId=sid) == {
        "delivered": True,
        "exitCode": 130,
    }
    r = await _call(harness, agent, "ssh_run", sessionId=sid, command="echo after")
    assert (r["output"], r["exitCode"]) == ("after\n", 0)
    await agent.dispose()


async def test_posix_sh_survives_interrupts_racing_the_end_of_a_command(
    sshd: Sshd, harness: Harness
) -> None:
    agent = harness.create_agent("sh")
    opened = await _call(harness, agent, "ssh_open", **open_args(sshd, port=sshd.sh_port))
    sid = opened["sessionId"]
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
