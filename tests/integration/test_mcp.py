"""``dsh-terminal mcp`` driven by the official MCP SDK client over stdio, as a real client would.

The server runs as a subprocess. Cleanup is proved from the outside: the server's
descendants are collected with psutil while it runs, and after a disconnect, SIGTERM or
SIGKILL every one of them must be gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.mcp.server import McpServerError, build_config, serve
from dsh_terminal_core.provider.census import still_running

from ..helpers import full_access

SERVER = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp"]
# Bounds for one whole test; real work here takes well under a second per step.
TEST_BOUND_S = 60
EXIT_BOUND_S = 15


def _server_command(workspace: Path, *extra: str, sandbox: str = "danger-full-access") -> list[str]:
    return [*SERVER, "--sandbox", sandbox, "--workspace", str(workspace), *extra]


@contextlib.asynccontextmanager
async def sdk_client(workspace: Path, log: Path) -> AsyncIterator[ClientSession]:
    """A session over the SDK's own stdio transport (which owns the server process)."""
    command = _server_command(workspace)
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=workspace)
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


class ServerProcess:
    """The server under our own control, so tests can signal it and read its exit code."""

    def __init__(self, process: anyio.abc.Process, session: ClientSession) -> None:
        self.process = process
        self.session = session

    @property
    def pid(self) -> int:
        return self.process.pid

    async def disconnect(self) -> None:
        """Close the server's stdin, as a client that goes away does."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def wait_exit(self) -> int:
        with anyio.fail_after(EXIT_BOUND_S):
            return await self.process.wait()


@contextlib.asynccontextmanager
async def raw_client(
    workspace: Path, log: Path, *extra: str, sandbox: str = "danger-full-access"
) -> AsyncIterator[ServerProcess]:
    """Spawn the server with plain pipes and run a ClientSession over them."""
    with log.open("w") as errlog:
        process = await anyio.open_process(
            _server_command(workspace, *extra, sandbox=sandbox),
            stderr=errlog,
            cwd=workspace,
            start_new_session=True,
        )
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](16)

    async def pump_out() -> None:
        assert process.stdout is not None
        pending = b""
        async with incoming_send:
            with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
                async for chunk in process.stdout:
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        await incoming_send.send(SessionMessage(message))

    async def pump_in() -> None:
        assert process.stdin is not None
        async with outgoing_receive:
            async for message in outgoing_receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                with contextlib.suppress(
                    anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
                ):
                    await process.stdin.send(data.encode() + b"\n")

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump_out)
            tg.start_soon(pump_in)
            async with ClientSession(incoming, outgoing) as session:
                await session.initialize()
                yield ServerProcess(process, session)
            tg.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


def descendants(pid: int) -> set[tuple[int, float]]:
    found: set[tuple[int, float]] = set()
    for proc in psutil.Process(pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            found.add((proc.pid, proc.create_time()))
    return found


async def wait_all_gone(procs: set[tuple[int, float]], bound_s: float = 10.0) -> list[int]:
    with anyio.move_on_after(bound_s):
        while still_running(procs):
            await anyio.sleep(0.05)
    return still_running(procs)


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, args)
    assert isinstance(result, types.CallToolResult)
    return result


def text_of(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


async def open_busy_sessions(session: ClientSession) -> int:
    """Open a shell running ``sleep 1000`` plus an idle shell and a pty session; return a pid."""
    busy = await call(session, "terminal_open", {"type": "shell", "name": "busy"})
    assert not busy.is_error, text_of(busy)
    assert busy.structured_content is not None
    sid = busy.structured_content["sessionId"]
    started = await call(
        session,
        "terminal_send",
        {"sessionId": sid, "text": "sleep 1000", "run_in_background": True},
    )
    assert not started.is_error, text_of(started)
    idle = await call(session, "terminal_open", {"type": "shell", "name": "idle"})
    assert not idle.is_error, text_of(idle)
    repl = await call(session, "pty_open", {"command": "python3 -q -i"})
    assert not repl.is_error, text_of(repl)
    return int(busy.structured_content["pid"])


async def wait_for_sleep(server_pid: int) -> set[tuple[int, float]]:
    """Wait until ``sleep 1000`` runs under the server; return every descendant seen."""
    with anyio.fail_after(10):
        while True:
            procs = descendants(server_pid)
            names = set()
            for pid, _ in procs:
                with contextlib.suppress(psutil.Error):
                    names.add(psutil.Process(pid).name())
            if {"bash", "sleep", "python3"} <= names:
                return procs
            await anyio.sleep(0.05)


# -- the tools over MCP ----------------------------------------------------------------


async def test_tools_list_matches_the_harness_schemas(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        expected = h.tool_schemas()
    with anyio.fail_after(TEST_BOUND_S):
        async with sdk_client(tmp_path, tmp_path / "server.log") as session:
            listed = await session.list_tools()
            instructions = session.instructions
    assert [t.name for t in listed.tools] == [s["name"] for s in expected]
    for tool, schema in zip(listed.tools, expected, strict=True):
        assert tool.input_schema == schema["parameters"], tool.name
        assert tool.description == schema["description"], tool.name
    names = {t.name for t in listed.tools}
    assert {"terminal_open", "terminal_send", "pty_open", "job_output", "job_kill"} <= names
    assert instructions and "terminal_open" in instructions


async def test_shell_and_python_repl_round_trip(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with sdk_client(tmp_path, tmp_path / "server.log") as session:
            opened = await call(session, "terminal_open", {"type": "shell", "name": "main"})
            assert not opened.is_error, text_of(opened)
            value = opened.structured_content
            assert value is not None and value["type"] == "shell"
            sid = value["sessionId"]
            assert text_of(opened).startswith(f"started terminal session {sid} (main)")

            echoed = await call(
                session, "terminal_send", {"sessionId": sid, "text": "echo mcp-$((20+22))"}
            )
            assert not echoed.is_error
            assert echoed.structured_content is not None
            assert echoed.structured_content["viewport"] == "mcp-42\n"
            assert echoed.structured_content["waitReason"] == "stdin_read"
            assert echoed.structured_content["exitCode"] == 0
            assert "mcp-42" in text_of(echoed)

            repl = await call(session, "terminal_send", {"sessionId": sid, "text": "python3 -q -i"})
            assert repl.structured_content is not None
            assert repl.structured_content["waitReason"] == "stdin_read"
            answer = await call(session, "terminal_send", {"sessionId": sid, "text": "6*7"})
            assert answer.structured_content is not None
            assert "42" in answer.structured_content["viewport"]
            assert answer.structured_content["waitReason"] == "stdin_read"
            assert answer.structured_content["exitCode"] is None  # a REPL read, not a prompt
            await call(session, "terminal_send", {"sessionId": sid, "text": "exit()"})

            read = await call(session, "terminal_read", {"sessionId": sid})
            assert read.structured_content is not None
            assert "mcp-42" in read.structured_content["text"]
            assert read.structured_content["totalLines"] >= 1

            listed = await call(session, "terminal_list", {})
            assert listed.structured_content is not None
            sessions = listed.structured_content["sessions"]
            assert [s["sessionId"] for s in sessions] == [sid]
            assert sessions[0]["cwd"] == os.path.realpath(
                tmp_path
            )  # --workspace reached the policy

            closed = await call(session, "terminal_close", {"sessionId": sid})
            assert closed.structured_content == {"closed": True}
            again = await call(session, "terminal_send", {"sessionId": sid, "text": "true"})
            assert again.is_error


async def test_invalid_arguments_are_mcp_tool_errors(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with sdk_client(tmp_path, tmp_path / "server.log") as session:
            wrong_type = await call(session, "terminal_send", {"sessionId": 5, "text": "x"})
            assert wrong_type.is_error
            assert text_of(wrong_type).startswith("error [INVALID_ARGUMENT]: ")
            assert wrong_type.structured_content is None

            unknown_key = await call(session, "terminal_open", {"type": "shell", "bogus": 1})
            assert unknown_key.is_error
            assert text_of(unknown_key).startswith("error [INVALID_ARGUMENT]: ")

            no_session = await call(session, "terminal_read", {"sessionId": "pty-99"})
            assert no_session.is_error
            assert text_of(no_session).startswith("error [NO_SESSION]: ")

            unknown_tool = await call(session, "no_such_tool", {})
            assert unknown_tool.is_error
            assert text_of(unknown_tool).startswith("error [")


async def test_background_job_notice_follows_the_next_result(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with sdk_client(tmp_path, tmp_path / "server.log") as session:
            opened = await call(session, "terminal_open", {"type": "shell"})
            assert opened.structured_content is not None
            sid = opened.structured_content["sessionId"]
            bg = await call(
                session,
                "terminal_send",
                {"sessionId": sid, "text": "echo bg-done", "run_in_background": True},
            )
            assert bg.structured_content is not None
            job = bg.structured_content["jobId"]
            # Never collected with job_output: the only way the model hears of the end.
            notices: list[str] = []
            while not notices:
                await anyio.sleep(0.05)
                listed = await call(session, "terminal_list", {})
                assert not listed.is_error
                notices = [c.text for c in listed.content[1:] if isinstance(c, types.TextContent)]
            assert len(notices) == 1 and job in notices[0] and "job_output" in notices[0], notices
            out = await call(session, "job_output", {"jobId": job})
            assert "bg-done" in text_of(out)


async def test_a_call_the_client_cancels_interrupts_the_command(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with sdk_client(tmp_path, tmp_path / "server.log") as session:
            opened = await call(session, "terminal_open", {"type": "shell"})
            assert opened.structured_content is not None
            sid = opened.structured_content["sessionId"]
            with anyio.move_on_after(1.0) as scope:
                await session.call_tool("terminal_send", {"sessionId": sid, "text": "sleep 50"})
            assert scope.cancelled_caught
            # The cancelled send released the session and SIGINT ended `sleep`.
            with anyio.fail_after(10):
                while True:
                    after = await call(
                        session, "terminal_send", {"sessionId": sid, "text": "echo back"}
                    )
                    if not after.is_error:
                        break
                    assert text_of(after).startswith("error [SEND_ACTIVE]")
                    await anyio.sleep(0.05)
            assert after.structured_content is not None
            assert after.structured_content["viewport"] == "back\n"
            assert after.structured_content["waitReason"] == "stdin_read"


# -- lifetime: every way the connection ends leaves no process -------------------------


async def test_disconnect_closes_every_session_and_exits_0(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with anyio.fail_after(TEST_BOUND_S):
        async with raw_client(tmp_path, log) as server:
            await open_busy_sessions(server.session)
            procs = await wait_for_sleep(server.pid)
            await server.disconnect()
            assert await server.wait_exit() == 0
        assert await wait_all_gone(procs) == []
    assert "the client disconnected" in log.read_text()


async def test_disconnect_with_a_call_in_flight_cancels_it(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with anyio.fail_after(TEST_BOUND_S):
        async with raw_client(tmp_path, log) as server:
            opened = await call(server.session, "terminal_open", {"type": "shell"})
            assert opened.structured_content is not None
            sid = opened.structured_content["sessionId"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(_call_ignoring_errors, server.session, sid, "sleep 998")
                procs = await _wait_for_command(server.pid, "998")
                await server.disconnect()
                # Well before the send's own 30 s limit: the call was cancelled, not awaited.
                with anyio.fail_after(10):
                    assert await server.wait_exit() == 0
                tg.cancel_scope.cancel()
        assert await wait_all_gone(procs) == []


async def _call_ignoring_errors(session: ClientSession, sid: str, text: str) -> None:
    with contextlib.suppress(Exception):
        await session.call_tool("terminal_send", {"sessionId": sid, "text": text})


async def _wait_for_command(server_pid: int, marker: str) -> set[tuple[int, float]]:
    """Wait until a descendant's command line contains ``marker``; return all seen so far."""
    seen: set[tuple[int, float]] = set()
    with anyio.fail_after(10):
        while True:
            seen |= descendants(server_pid)
            if any(marker in " ".join(_cmdline(pid)) for pid, _ in seen):
                return seen
            await anyio.sleep(0.05)


async def test_sigterm_with_a_call_in_flight_closes_everything_and_exits_0(
    tmp_path: Path,
) -> None:
    log = tmp_path / "server.log"
    with anyio.fail_after(TEST_BOUND_S):
        async with raw_client(tmp_path, log) as server:
            await open_busy_sessions(server.session)
            # A foreground send still waiting for its command when the signal lands.
            opened = await call(server.session, "terminal_open", {"type": "shell", "name": "fg"})
            assert opened.structured_content is not None
            fg = opened.structured_content["sessionId"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(_call_ignoring_errors, server.session, fg, "sleep 999")
                procs = await wait_for_sleep(server.pid)
                procs |= await _wait_for_command(server.pid, "999")
                os.kill(server.pid, signal.SIGTERM)
                assert await server.wait_exit() == 0
                tg.cancel_scope.cancel()
        assert await wait_all_gone(procs) == []
    assert "received SIGTERM" in log.read_text()


async def test_sigkill_of_the_server_hangs_up_its_shells(tmp_path: Path) -> None:
    """No exit hook runs on SIGKILL: the PTY hangup and the host-death guardian end the shells.

    Closing the master (the dead server's only copy) sends SIGHUP to each shell, and an
    interactive bash hangs up its jobs, foreground and background, before exiting.
    """
    with anyio.fail_after(TEST_BOUND_S):
        async with raw_client(tmp_path, tmp_path / "server.log") as server:
            opened = await call(server.session, "terminal_open", {"type": "shell"})
            assert opened.structured_content is not None
            sid = opened.structured_content["sessionId"]
            await call(
                server.session,
                "terminal_send",
                {"sessionId": sid, "text": "sleep 1001 & sleep 1000", "run_in_background": True},
            )
            with anyio.fail_after(10):
                while True:
                    procs = descendants(server.pid)
                    sleeps = [p for p, _ in procs if "sleep" in " ".join(_cmdline(p))]
                    if len(sleeps) == 2:
                        break
                    await anyio.sleep(0.05)
            os.kill(server.pid, signal.SIGKILL)
            assert await server.wait_exit() == -signal.SIGKILL
        assert await wait_all_gone(procs) == []


async def test_unusable_sandbox_is_announced_at_startup(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"sandbox-bwrap": {"bwrap_path": str(tmp_path / "no-bwrap")}}))
    log = tmp_path / "server.log"
    with anyio.fail_after(TEST_BOUND_S):
        async with raw_client(
            tmp_path, log, "--config", str(config), sandbox="workspace-write"
        ) as server:
            opened = await call(server.session, "terminal_open", {"type": "shell"})
            assert opened.is_error
            assert "bubblewrap" in text_of(opened)
            await server.disconnect()
            assert await server.wait_exit() == 0
    text = log.read_text()
    assert "sandbox mode 'workspace-write'" in text
    assert "terminal_open will fail" in text and "--sandbox danger-full-access" in text


async def test_bad_config_fails_startup_with_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"terminal-bash": {"no_such_key": 1}}))
    with anyio.fail_after(TEST_BOUND_S):
        process = await anyio.run_process(
            _server_command(tmp_path, "--config", str(config)),
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert process.returncode == 2
    assert b"no_such_key" in process.stderr


def _cmdline(pid: int) -> list[str]:
    try:
        return [str(part) for part in psutil.Process(pid).cmdline()]
    except psutil.Error:
        return []


# -- configuration and the missing extra (in-process, no server) -----------------------


def test_flags_win_over_env_and_env_over_the_file(tmp_path: Path) -> None:
    file = tmp_path / "c.json"
    file.write_text(
        json.dumps(
            {
                "sandbox-policy": {"mode": "read-only", "workspace_root": "/"},
                "terminal-bash": {"timeout_ms": 60000},
            }
        )
    )
    env = {"DSH_SANDBOX_MODE": "workspace-write", "DSH_WORKSPACE_ROOT": str(tmp_path)}
    assert build_config(str(file), None, None, {}) == {
        "sandbox-policy": {"mode": "read-only", "workspace_root": "/"},
        "terminal-bash": {"timeout_ms": 60000},
    }
    from_env = build_config(str(file), None, None, env)
    assert from_env["sandbox-policy"] == {
        "mode": "workspace-write",
        "workspace_root": str(tmp_path),
    }
    from_flags = build_config(str(file), "danger-full-access", "/tmp", env)
    assert from_flags["sandbox-policy"] == {"mode": "danger-full-access", "workspace_root": "/tmp"}
    assert from_flags["terminal-bash"] == {"timeout_ms": 60000}


def test_bad_values_are_refused_with_their_origin(tmp_path: Path) -> None:
    with pytest.raises(McpServerError, match="DSH_SANDBOX_MODE='yolo'"):
        build_config(None, None, None, {"DSH_SANDBOX_MODE": "yolo"})
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(McpServerError, match="JSON object of plugin sections"):
        build_config(str(bad), None, None, {})
    bad.write_text('{"terminal-bash": 3}')
    with pytest.raises(McpServerError, match="'terminal-bash' must be a JSON object"):
        build_config(str(bad), None, None, {})
    with pytest.raises(McpServerError, match="cannot read config file"):
        build_config(str(tmp_path / "missing.json"), None, None, {})


def test_relative_workspace_is_resolved_against_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = build_config(None, None, "sub", {})
    assert config["sandbox-policy"]["workspace_root"] == str(tmp_path / "sub")


def test_without_the_mcp_extra_serve_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    assert serve(None, "danger-full-access", None) == 2
    assert "pip install 'dsh-terminal-core[mcp]'" in capsys.readouterr().err
