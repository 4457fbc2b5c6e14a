"""Profile ``codex`` (SPEC §30.1): Codex's exec_command/write_stdin over real shells.

Production timing throughout (no readiness overrides): the results are the ones a model
would read, in the shape Codex publishes (``ExecCommandToolOutput::response_text`` and
``unified_exec_output_schema`` of openai/codex).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import ConfigError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.tools import ToolResult
from dsh_terminal_core.registry import SpawnRequest
from dsh_tool_terminal.codex import MAX_CODEX_SESSIONS

from ..helpers import TERMINAL_TOOLS, full_access

CODEX = {"profile": "codex"}
# The header Codex writes, line by line, before the output.
HEADER = re.compile(
    r"Chunk ID: (?P<chunk>[0-9a-f]{6})\n"
    r"Wall time: (?P<wall>\d+\.\d{4}) seconds\n"
    r"(?:Process exited with code (?P<exit>-?\d+)\n)?"
    r"(?:Process running with session ID (?P<sid>\d+)\n)?"
    r"Original token count: (?P<tokens>\d+)\n"
    r"Output:\n"
)
VALUE_KEYS = {
    "chunk_id",
    "wall_time_seconds",
    "original_token_count",
    "output",
    "wait_reason",
    "input_hidden",
    "sessionId",
}


def _checked(result: ToolResult) -> dict[str, Any]:
    """The value, after proving the text says field by field what the value says."""
    assert not result.is_error, result.text
    value: dict[str, Any] = result.value
    match = HEADER.match(result.text)
    assert match is not None, result.text
    assert match["chunk"] == value["chunk_id"]
    assert float(match["wall"]) == pytest.approx(value["wall_time_seconds"], abs=1e-4)
    assert match["tokens"] == str(value["original_token_count"])
    assert result.text[match.end() :] == value["output"]
    assert re.fullmatch(r"pty-\d+", value["sessionId"])
    if "exit_code" in value:
        assert match["exit"] == str(value["exit_code"]) and match["sid"] is None
        assert set(value) == VALUE_KEYS | {"exit_code"}
    else:
        assert match["sid"] == str(value["session_id"]) and match["exit"] is None
        assert value["sessionId"] == f"pty-{value['session_id']}"
        assert set(value) - {"periodic"} == VALUE_KEYS | {"session_id"}
    return value


async def _exec(h: Harness, agent: Agent, **args: Any) -> dict[str, Any]:
    return _checked(await h.call_tool(agent, "exec_command", args))


async def _write(h: Harness, agent: Agent, session_id: int, **args: Any) -> dict[str, Any]:
    return _checked(await h.call_tool(agent, "write_stdin", {"session_id": session_id, **args}))


def _codex_sessions(h: Harness, agent: Agent) -> list[str]:
    return [s.session_id for s in h.ctx.terminals.list(agent) if s.opened_by == "codex"]


async def test_the_profile_offers_exactly_the_codex_tools_with_their_fields() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CODEX})) as h:
        schemas = {s["name"]: s for s in h.tool_schemas()}
    assert {"exec_command", "write_stdin"} <= set(schemas)
    assert not set(TERMINAL_TOOLS) & set(schemas)
    exec_params = schemas["exec_command"]["parameters"]
    assert set(exec_params["properties"]) == {
        "cmd",
        "workdir",
        "shell",
        "login",
        "tty",
        "yield_time_ms",
        "max_output_tokens",
    }
    assert exec_params["required"] == ["cmd"]
    write_params = schemas["write_stdin"]["parameters"]
    assert set(write_params["properties"]) == {
        "session_id",
        "chars",
        "yield_time_ms",
        "max_output_tokens",
    }
    assert write_params["required"] == ["session_id"]
    output = schemas["exec_command"]["outputSchema"]
    assert {"chunk_id", "wall_time_seconds", "exit_code", "session_id"} <= set(output["properties"])
    assert set(output["required"]) >= {"wall_time_seconds", "output"}


async def test_an_unknown_profile_is_refused_at_load() -> None:
    with pytest.raises(ConfigError, match=r"profile must be one of dsh, codex, claude"):
        await Harness(config=full_access(**{"tool-terminal": {"profile": "gemini"}})).start()


async def test_a_scripted_codex_flow(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path), **{"tool-terminal": CODEX})) as h:
        agent = h.create_agent("a")

        done = await _exec(h, agent, cmd="echo hi; false")
        assert (done["exit_code"], done["output"], done["wait_reason"]) == (1, "hi\n", "stdin_read")
        assert _codex_sessions(h, agent) == []  # an exited command leaves no session

        where = await _exec(h, agent, cmd="pwd", workdir=str(tmp_path))
        assert where["output"] == os.path.realpath(tmp_path) + "\n"
        shell = await _exec(h, agent, cmd='echo "$0"', shell="bash", login=False)
        assert (shell["exit_code"], shell["output"]) == (0, "bash\n")
        assert (await _exec(h, agent, cmd="exit 3"))["exit_code"] == 3

        # A Python REPL kept across calls; Ctrl-C stops the statement, not the REPL.
        repl = await _exec(h, agent, cmd="python3 -q -i")
        sid = repl["session_id"]
        assert (repl["output"], repl["wait_reason"]) == (">>> ", "stdin_read")
        await _write(h, agent, sid, chars="x = 6\n")
        answer = await _write(h, agent, sid, chars="x * 7\n")
        assert answer["session_id"] == sid and "42\n" in answer["output"]
        interrupted = await _write(h, agent, sid, chars="\u0003")
        assert interrupted["session_id"] == sid and "KeyboardInterrupt" in interrupted["output"]
        left = await _write(h, agent, sid, chars="exit()\n")
        assert left["exit_code"] == 0
        gone = await h.call_tool(agent, "write_stdin", {"session_id": sid, "chars": "1\n"})
        assert gone.is_error and gone.text.startswith("error [NO_SESSION]")

        # A long build outlives the yield; every line is read once, across the calls.
        build = await _exec(
            h,
            agent,
            cmd="for i in 1 2 3 4 5; do echo step $i; sleep 0.3; done; echo BUILD OK",
            yield_time_ms=400,
        )
        assert build["wait_reason"] == "timeout"
        await asyncio.sleep(0.7)  # lines written between two calls
        rest = await _write(h, agent, build["session_id"], yield_time_ms=20000)
        assert rest["exit_code"] == 0
        lines = (build["output"] + rest["output"]).splitlines()
        assert lines == [f"step {i}" for i in range(1, 6)] + ["BUILD OK"]

        # Ctrl-C of a running command ends it with the shell's 130.
        sleeper = await _exec(h, agent, cmd="sleep 30", yield_time_ms=300)
        stopped = await _write(h, agent, sleeper["session_id"], chars="\u0003")
        assert stopped["exit_code"] == 130

        # A hidden prompt: said so, answered, and the answer is never shown.
        secret = await _exec(h, agent, cmd="read -s -p 'Password: ' PW; echo got ${#PW}")
        assert secret["input_hidden"] is True and secret["output"] == "Password: "
        answered = await _write(h, agent, secret["session_id"], chars="hunter2\n")
        assert answered["exit_code"] == 0 and "got 7" in answered["output"]
        assert "hunter2" not in answered["output"]
        assert _codex_sessions(h, agent) == []


async def test_another_agents_session_is_refused() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CODEX})) as h:
        owner, other = h.create_agent("owner"), h.create_agent("other")
        repl = await _exec(h, owner, cmd="cat")
        foreign = await h.call_tool(
            other, "write_stdin", {"session_id": repl["session_id"], "chars": "x\n"}
        )
        assert foreign.is_error and foreign.text.startswith("error [FOREIGN_SESSION]")
        unknown = await h.call_tool(owner, "write_stdin", {"session_id": 99999})
        assert unknown.is_error and unknown.text.startswith("error [NO_SESSION]")
        assert "Process running with session ID" in unknown.text  # what to do instead
        # A session of the owner's that exec_command did not open is not one of its.
        other_kind = await h.ctx.terminals.spawn(owner, SpawnRequest(type="shell"))
        number = int(other_kind.session_id.removeprefix("pty-"))
        refused = await h.call_tool(owner, "write_stdin", {"session_id": number})
        assert refused.is_error and refused.text.startswith("error [NO_SESSION]")
        still = await _write(h, owner, repl["session_id"], chars="still mine\n")
        assert "still mine" in still["output"]


async def test_at_most_64_running_sessions_per_agent() -> None:
    config = full_access(
        terminals={"max_sessions_per_owner": MAX_CODEX_SESSIONS + 8},
        **{"tool-terminal": CODEX},
    )
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        for batch in range(0, MAX_CODEX_SESSIONS, 16):
            opened = await asyncio.gather(*(_exec(h, agent, cmd="cat") for _ in range(16)))
            assert all("session_id" in value for value in opened), batch
        assert len(_codex_sessions(h, agent)) == MAX_CODEX_SESSIONS
        over = await h.call_tool(agent, "exec_command", {"cmd": "echo never"})
        assert over.is_error and over.text.startswith("error [SESSION_LIMIT]")
        assert len(_codex_sessions(h, agent)) == MAX_CODEX_SESSIONS  # nothing was opened
        # Ending one command (EOF to cat) frees its place.
        first = int(_codex_sessions(h, agent)[0].removeprefix("pty-"))
        assert (await _write(h, agent, first, chars="\u0004"))["exit_code"] == 0
        assert (await _exec(h, agent, cmd="echo again"))["output"] == "again\n"
        # Another agent has places of its own.
        other = h.create_agent("b")
        assert (await _exec(h, other, cmd="echo mine"))["exit_code"] == 0


async def test_the_registrys_lower_limit_is_explained_in_codex_terms() -> None:
    config = full_access(terminals={"max_sessions_per_owner": 1}, **{"tool-terminal": CODEX})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        held = await _exec(h, agent, cmd="cat")
        refused = await h.call_tool(agent, "exec_command", {"cmd": "echo never"})
        assert refused.is_error and refused.text.startswith("error [SESSION_LIMIT]")
        assert "terminal_close" not in refused.text and "write_stdin" in refused.text
        assert (await _write(h, agent, held["session_id"], chars="\u0004"))["exit_code"] == 0


async def test_calls_are_audited_with_the_session_they_were_about(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    config = full_access(audit={"file": str(audit)}, **{"tool-terminal": CODEX})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        repl = await _exec(h, agent, cmd="cat")
        await _write(h, agent, repl["session_id"], chars="\u0004")
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["tool"], e["sessionId"]) for e in entries] == [
        ("exec_command", repl["sessionId"]),
        ("write_stdin", repl["sessionId"]),
    ]


async def _until_started(h: Harness, agent: Agent) -> None:
    async with asyncio.timeout(10):
        while not any(
            "started" in h.ctx.terminals.complete_lines_since(agent, sid, 0)[0]
            for sid in _codex_sessions(h, agent)
        ):
            await asyncio.sleep(0.02)


async def test_a_cancelled_exec_command_interrupts_and_leaves_no_session() -> None:
    long = {"cmd": "echo started; sleep 30", "yield_time_ms": 30000}
    async with Harness(config=full_access(**{"tool-terminal": CODEX})) as h:
        agent = h.create_agent("a")
        # The caller's token: the command gets Ctrl-C and the result says how it ended.
        token = Cancellation()
        call = asyncio.create_task(h.call_tool(agent, "exec_command", long, cancel=token))
        await _until_started(h, agent)
        token.cancel()
        assert _checked(await call)["exit_code"] == 130
        assert _codex_sessions(h, agent) == []
        # The calling task cancelled (what an MCP client's cancel becomes): no session stays.
        task = asyncio.create_task(h.call_tool(agent, "exec_command", long))
        await _until_started(h, agent)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert _codex_sessions(h, agent) == []


# A program that prints on a 0.3 s beat and never reads the terminal (a line session's
# ``watch`` draws once and then stays silent: TERM=dumb).
BEAT = "python3 -u -c 'import time\nwhile True: print(time.time()); time.sleep(0.3)'"


async def test_a_program_redrawing_on_a_clock_returns_periodic_and_keeps_running() -> None:
    async with Harness(config=full_access(**{"tool-terminal": CODEX})) as h:
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "exec_command", {"cmd": BEAT, "yield_time_ms": 20000})
        value = _checked(result)
        assert value["wait_reason"] == "inferred_idle" and value["periodic"] is True, value
        assert "exit_code" not in value and "session_id" in value, value
        stopped = await _write(h, agent, value["session_id"], chars="\u0003", yield_time_ms=5000)
        assert stopped["exit_code"] == 130 and "periodic" not in stopped, stopped
