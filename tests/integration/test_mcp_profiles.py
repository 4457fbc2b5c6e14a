"""``dsh-terminal mcp --tools codex|claude`` (SPEC §30.1) with the official MCP SDK client.

Under a profile the server offers exactly that profile's tools, and only those answer;
the results carry the peer's text and the structured value its output schema declares.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from dsh_terminal_core.mcp.profiles import with_profile

TEST_BOUND_S = 60


@contextlib.asynccontextmanager
async def profile_client(workspace: Path, tools: str) -> AsyncIterator[ClientSession]:
    """The SDK's stdio client over ``dsh-terminal mcp --tools TOOLS``."""
    args = ["-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
    args += ["--workspace", str(workspace), "--tools", tools]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=workspace)
    with (workspace / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def _call(session: ClientSession, name: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, args)
    assert isinstance(result, types.CallToolResult)
    return result


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_tools_codex_lists_exactly_the_codex_tools_and_runs_them(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with profile_client(tmp_path, "codex") as session:
            listed = await session.list_tools()
            assert [tool.name for tool in listed.tools] == ["exec_command", "write_stdin"]
            exec_tool = listed.tools[0]
            assert exec_tool.output_schema is not None
            assert "session_id" in exec_tool.output_schema["properties"]

            done = await _call(session, "exec_command", {"cmd": "echo mcp-$((20+22)); (exit 5)"})
            assert not done.is_error, _text(done)
            assert done.structured_content is not None
            assert done.structured_content["exit_code"] == 5
            assert done.structured_content["output"] == "mcp-42\n"
            assert re.match(
                r"Chunk ID: [0-9a-f]{6}\nWall time: \d+\.\d{4} seconds\n"
                r"Process exited with code 5\nOriginal token count: \d+\nOutput:\nmcp-42\n$",
                _text(done),
            ), _text(done)

            repl = await _call(session, "exec_command", {"cmd": "python3 -q -i"})
            assert repl.structured_content is not None
            sid = repl.structured_content["session_id"]
            assert f"Process running with session ID {sid}\n" in _text(repl)
            answer = await _call(session, "write_stdin", {"session_id": sid, "chars": "6*7\n"})
            assert answer.structured_content is not None
            assert "42" in answer.structured_content["output"]
            left = await _call(session, "write_stdin", {"session_id": sid, "chars": "exit()\n"})
            assert left.structured_content is not None
            assert left.structured_content["exit_code"] == 0

            sleeper = await _call(
                session, "exec_command", {"cmd": "sleep 30", "yield_time_ms": 300}
            )
            assert sleeper.structured_content is not None
            stop = {"session_id": sleeper.structured_content["session_id"], "chars": "\u0003"}
            stopped = await _call(session, "write_stdin", stop)
            assert stopped.structured_content is not None
            assert stopped.structured_content["exit_code"] == 130

            asked = await _call(
                session, "exec_command", {"cmd": "read -s -p 'Pass: ' P; echo ${#P}"}
            )
            assert asked.structured_content is not None
            assert asked.structured_content["input_hidden"] is True
            answer_id = asked.structured_content["session_id"]
            told = await _call(session, "write_stdin", {"session_id": answer_id, "chars": "abc\n"})
            assert told.structured_content is not None
            assert (told.structured_content["exit_code"], told.structured_content["output"]) == (
                0,
                "3\n",
            )

            hidden = await _call(session, "terminal_open", {})
            assert hidden.is_error and _text(hidden).startswith("error [UNKNOWN_TOOL]")


async def test_tools_claude_lists_exactly_the_claude_tools_and_runs_them(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with profile_client(tmp_path, "claude") as session:
            listed = await session.list_tools()
            assert [tool.name for tool in listed.tools] == ["Bash", "TaskOutput", "TaskStop"]
            ran = await _call(session, "Bash", {"command": "export N=7; echo n=$N; false"})
            assert ran.structured_content is not None
            assert ran.structured_content["stdout"] == "n=7\n"
            assert ran.structured_content["exitCode"] == 1
            assert _text(ran).startswith("Exit code 1\n")
            started = await _call(
                session, "Bash", {"command": "echo bg-$N; (exit 3)", "run_in_background": True}
            )
            assert started.structured_content is not None
            task_id = started.structured_content["backgroundTaskId"]
            collected = await _call(session, "TaskOutput", {"task_id": task_id, "timeout": 20000})
            assert collected.structured_content is not None
            task = collected.structured_content["task"]
            # A background command runs in a shell of its own: N is not set there.
            assert (task["status"], task["exitCode"], task["output"]) == ("failed", 3, "bg-\n")

            repl = await _call(session, "Bash", {"command": "python3 -q -i"})
            assert (
                repl.structured_content is not None and repl.structured_content["exitCode"] is None
            )
            answer = await _call(session, "Bash", {"command": "6*7"})
            assert answer.structured_content is not None
            assert answer.structured_content["stdout"] == "42\n>>> "
            await _call(session, "Bash", {"command": "exit()"})

            sleeper = await _call(
                session, "Bash", {"command": "sleep 60", "run_in_background": True}
            )
            assert sleeper.structured_content is not None
            sleeper_id = sleeper.structured_content["backgroundTaskId"]
            stopped = await _call(session, "TaskStop", {"task_id": sleeper_id})
            assert stopped.structured_content is not None
            assert stopped.structured_content["message"].startswith("Successfully stopped task")


def test_the_flag_wins_over_the_config_file() -> None:
    config: dict[str, dict[str, Any]] = {
        "tool-terminal": {"profile": "claude", "max_result_bytes": 4096}
    }
    assert with_profile(config, "codex")["tool-terminal"] == {
        "profile": "codex",
        "max_result_bytes": 4096,
    }
    assert with_profile({}, None) == {}
    # Codex's 64 running sessions fit the registry, unless the file says otherwise.
    assert with_profile({}, "codex")["terminals"] == {"max_sessions_per_owner": 64}
    mine = {"terminals": {"max_sessions_per_owner": 8}}
    assert with_profile(mine, "codex")["terminals"] == {"max_sessions_per_owner": 8}
    assert "terminals" not in with_profile({}, "claude")
