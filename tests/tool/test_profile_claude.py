"""Profile ``claude`` (SPEC §30.1): Claude Code's Bash, TaskOutput and TaskStop over real shells.

Production timing throughout (no readiness overrides). Input fields follow Claude Code
2.1.276's ``sdk-tools.d.ts``; the values are checked field by field.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.tools import ToolResult

from ..helpers import TERMINAL_TOOLS, full_access

CLAUDE = {"profile": "claude"}


async def _bash(h: Harness, agent: Agent, command: str, **args: Any) -> ToolResult:
    result = await h.call_tool(agent, "Bash", {"command": command, **args})
    assert not result.is_error, result.text
    return result


async def _task_output(h: Harness, agent: Agent, task_id: str, **args: Any) -> dict[str, Any]:
    result = await h.call_tool(agent, "TaskOutput", {"task_id": task_id, **args})
    assert not result.is_error, result.text
    value: dict[str, Any] = result.value
    task = value["task"]
    assert set(value) == {"retrieval_status", "task", "sessionId"}
    assert set(task) == {"task_id", "task_type", "status", "description", "output", "exitCode"}
    assert task["task_id"] == task_id and task["task_type"] == "local_bash"
    assert f"<retrieval_status>{value['retrieval_status']}</retrieval_status>" in result.text
    assert f"<status>{task['status']}</status>" in result.text
    return value


async def test_the_profile_offers_exactly_the_claude_tools_with_their_fields() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CLAUDE})) as h:
        schemas = {s["name"]: s for s in h.tool_schemas()}
    assert {"Bash", "TaskOutput", "TaskStop"} <= set(schemas)
    assert not set(TERMINAL_TOOLS) & set(schemas)
    bash = schemas["Bash"]["parameters"]
    assert set(bash["properties"]) == {"command", "timeout", "description", "run_in_background"}
    assert bash["required"] == ["command"]
    assert bash["properties"]["timeout"]["anyOf"][0]["maximum"] == 600000
    output = schemas["TaskOutput"]["parameters"]
    assert set(output["properties"]) == {"task_id", "block", "timeout"}
    assert output["required"] == ["task_id"]
    assert set(schemas["TaskStop"]["parameters"]["properties"]) == {"task_id", "shell_id"}


async def test_a_scripted_claude_flow(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path), **{"tool-terminal": CLAUDE})) as h:
        agent = h.create_agent("a")

        # One persistent shell: the directory and exported variables carry over.
        (tmp_path / "sub").mkdir()
        moved = await _bash(h, agent, "cd sub && export STAGE=two", description="Enter sub")
        shell = moved.value["sessionId"]
        assert moved.value == {
            "stdout": "",
            "stderr": "",
            "interrupted": False,
            "exitCode": 0,
            "sessionId": shell,
        }
        assert [s.session_id for s in h.ctx.terminals.list(agent)] == [shell]
        failed = await _bash(h, agent, "pwd; echo $STAGE; false")
        assert failed.value == {
            "stdout": f"{os.path.realpath(tmp_path / 'sub')}\ntwo\n",
            "stderr": "",
            "interrupted": False,
            "exitCode": 1,
            "sessionId": shell,  # the same persistent shell
        }
        assert failed.text.splitlines()[0] == "Exit code 1"

        # A Python REPL kept across calls.
        repl = await _bash(h, agent, "python3 -q -i")
        assert repl.value["stdout"] == ">>> " and repl.value["exitCode"] is None
        await _bash(h, agent, "x = 6")
        answer = await _bash(h, agent, "x * 7")
        assert answer.value["stdout"] == "42\n>>> "
        left = await _bash(h, agent, "exit()")
        assert left.value["exitCode"] == 0

        # The timeout bounds a command: it is interrupted, and says so.
        slow = await _bash(h, agent, "sleep 30", timeout=1500)
        assert slow.value["interrupted"] is True and slow.value["exitCode"] == 130
        assert "timed out" in slow.text

        # A hidden prompt is reported as one; the answer is never shown.
        asked = await _bash(h, agent, "read -s -p 'Password: ' PW; echo got ${#PW}")
        assert asked.value["inputHidden"] is True and asked.value["stdout"] == "Password: "
        answered = await _bash(h, agent, "hunter2")
        assert answered.value["stdout"] == "got 7\n" and answered.value["exitCode"] == 0

        # The shell exiting is reported; the next command gets a new shell.
        ended = await _bash(h, agent, "exit 4")
        assert ended.value["exitCode"] == 4
        fresh = await _bash(h, agent, 'echo "[$STAGE]"')
        assert fresh.value["stdout"] == "[]\n"


async def test_a_background_build_collected_later_and_a_stopped_task() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CLAUDE})) as h:
        agent = h.create_agent("a")
        started = await _bash(
            h,
            agent,
            "for i in 1 2 3; do echo built $i; sleep 0.4; done; echo BUILD OK",
            run_in_background=True,
            description="Build",
        )
        task_id = started.value["backgroundTaskId"]
        build_session = started.value["sessionId"]
        assert started.value == {
            "stdout": "",
            "stderr": "",
            "interrupted": False,
            "backgroundTaskId": task_id,
            "sessionId": build_session,
        }
        assert f"Command running in background with ID: {task_id}" in started.text
        # The persistent shell is free meanwhile.
        assert (await _bash(h, agent, "echo meanwhile")).value["stdout"] == "meanwhile\n"
        peek = await _task_output(h, agent, task_id, block=False)
        assert peek["retrieval_status"] == "not_ready" and peek["task"]["status"] == "running"
        collected = await _task_output(h, agent, task_id, block=True, timeout=30000)
        assert collected["retrieval_status"] == "success"
        assert collected["sessionId"] == build_session
        task = collected["task"]
        assert (task["status"], task["exitCode"], task["description"]) == ("completed", 0, "Build")
        assert (peek["task"]["output"] + task["output"]).splitlines() == [
            "built 1",
            "built 2",
            "built 3",
            "BUILD OK",
        ]

        sleeper = await _bash(h, agent, "sleep 60", run_in_background=True)
        sleeper_id = sleeper.value["backgroundTaskId"]
        stopped = await h.call_tool(agent, "TaskStop", {"task_id": sleeper_id})
        assert stopped.value == {
            "message": f"Successfully stopped task: {sleeper_id} (sleep 60)",
            "task_id": sleeper_id,
            "task_type": "local_bash",
            "command": "sleep 60",
            "sessionId": sleeper.value["sessionId"],
        }
        after = await _task_output(h, agent, sleeper_id)
        assert (after["task"]["status"], after["task"]["exitCode"]) == ("killed", 130)
        again = await h.call_tool(agent, "TaskStop", {"task_id": sleeper_id})
        assert again.is_error and "not running" in again.text
        # Each background command had a session of its own, closed when it ended.
        assert [s.opened_by for s in h.ctx.terminals.list(agent)] == ["claude"]


async def test_another_agents_shell_and_tasks_are_its_own() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CLAUDE})) as h:
        owner, other = h.create_agent("owner"), h.create_agent("other")
        await _bash(h, owner, "export WHO=owner")
        assert (await _bash(h, other, 'echo "[$WHO]"')).value["stdout"] == "[]\n"
        started = await _bash(h, owner, "sleep 30", run_in_background=True)
        task_id = started.value["backgroundTaskId"]
        for tool, args in (
            ("TaskOutput", {"task_id": task_id}),
            ("TaskStop", {"task_id": task_id}),
        ):
            refused = await h.call_tool(other, tool, args)
            assert refused.is_error and refused.text.startswith("error [FOREIGN_JOB]"), tool
        unknown = await h.call_tool(owner, "TaskOutput", {"task_id": "job-999"})
        assert unknown.is_error and unknown.text.startswith("error [NO_JOB]")
        assert (await h.call_tool(owner, "TaskStop", {"task_id": task_id})).is_error is False


async def _until_printed(h: Harness, agent: Agent, marker: str) -> None:
    """Wait until a session of ``agent``'s printed ``marker`` on a line of its own."""
    async with asyncio.timeout(10):
        while True:
            for snapshot in h.ctx.terminals.list(agent):
                lines, _ = h.ctx.terminals.complete_lines_since(agent, snapshot.session_id, 0)
                if marker in lines:
                    return
            await asyncio.sleep(0.02)


async def test_a_cancelled_call_is_a_ctrl_c_and_the_shell_takes_the_next() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CLAUDE})) as h:
        agent = h.create_agent("a")
        token = Cancellation()
        call = asyncio.create_task(
            h.call_tool(agent, "Bash", {"command": "echo started; sleep 30"}, cancel=token)
        )
        await _until_printed(h, agent, "started")
        token.cancel()
        cancelled = await call
        assert cancelled.value["interrupted"] is True and cancelled.value["exitCode"] == 130
        assert "cancelled" in cancelled.value["returnCodeInterpretation"]
        after = await _bash(h, agent, "echo next; echo $?")
        assert after.value["stdout"] == "next\n0\n"


async def test_task_stop_ends_a_command_that_ignores_ctrl_c() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CLAUDE})) as h:
        agent = h.create_agent("a")
        started = await _bash(h, agent, "trap '' INT; echo armed; sleep 60", run_in_background=True)
        task_id = started.value["backgroundTaskId"]
        await _until_printed(h, agent, "armed")
        stopped = await h.call_tool(agent, "TaskStop", {"task_id": task_id})
        assert not stopped.is_error, stopped.text
        after = await _task_output(h, agent, task_id, block=False)
        assert after["task"]["status"] == "killed"
        assert h.ctx.terminals.list(agent) == []  # its session, and the sleep, are gone


async def test_a_command_redrawing_on_a_clock_is_interrupted_without_waiting_its_timeout() -> None:
    """A program printing on a beat and never reading keys never finishes: at its
    ``periodic`` settle it gets Ctrl-C, instead of at the 120 s bound."""
    beat = "python3 -u -c 'import time\nwhile True: print(time.time()); time.sleep(0.3)'"
    async with Harness(config=full_access(**{"tool-terminal": CLAUDE})) as h:
        agent = h.create_agent("a")
        result = await _bash(h, agent, beat)
        value = result.value
        assert value["periodic"] is True and value["interrupted"] is True, value
        assert value["exitCode"] == 130, value
        assert "periodic" in value["returnCodeInterpretation"], value
        after = await _bash(h, agent, "echo next")
        assert after.value["exitCode"] == 0 and "next" in after.value["stdout"], after.value
