"""Calls over MCP stdio and HTTP reach the same audit log and recordings (SPEC §23).

The servers are the real CLI in subprocesses, configured with a ``--config`` file; the
records plugins are found by discovery (this checkout's entry points, see conftest).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
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

from ..integration.test_mcp_http import TOKEN_A, TOKEN_B, connect, http_server
from .support import asciinema_cat, only_cast

TEST_BOUND_S = 90


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "recording": {"dir": str(tmp_path / "casts")},
                "audit": {"file": str(tmp_path / "audit.jsonl")},
            }
        )
    )
    return config


@contextlib.asynccontextmanager
async def stdio_session(workspace: Path, config: Path) -> AsyncIterator[ClientSession]:
    command = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp"]
    command += ["--sandbox", "danger-full-access", "--workspace", str(workspace)]
    command += ["--config", str(config)]
    # The whole environment: the SDK's default would drop PYTHONPATH (this checkout).
    params = StdioServerParameters(
        command=command[0], args=command[1:], cwd=workspace, env=dict(os.environ)
    )
    with (workspace / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, args)
    assert isinstance(result, types.CallToolResult)
    return result


def audit_lines(tmp_path: Path) -> list[dict[str, Any]]:
    text = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


async def test_stdio_calls_are_audited_and_recorded(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with anyio.fail_after(TEST_BOUND_S):
        async with stdio_session(tmp_path, config) as session:
            opened = await call(session, "terminal_open", {"type": "shell"})
            sid = opened.structured_content["sessionId"]
            await call(session, "terminal_send", {"sessionId": sid, "text": "echo over-stdio ✓"})
            failed = await call(session, "terminal_send", {"sessionId": "pty-77", "text": "x"})
            assert failed.is_error
            # written before the result was returned: the client already can read it
            assert audit_lines(tmp_path)[-1]["outcome"] == {"isError": True, "code": "NO_SESSION"}
            await call(session, "terminal_close", {"sessionId": sid})
    entries = audit_lines(tmp_path)
    assert [e["tool"] for e in entries] == [
        "terminal_open",
        "terminal_send",
        "terminal_send",
        "terminal_close",
    ]
    assert {e["agent"] for e in entries} == {"mcp-client"}
    assert all("identity" not in e for e in entries)
    assert "\r\nover-stdio ✓\r\n" in asciinema_cat(only_cast(tmp_path / "casts"))


async def test_http_calls_carry_the_token_identity(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with anyio.fail_after(TEST_BOUND_S):
        async with http_server(tmp_path, "--config", str(config)) as server:
            for token in (TOKEN_A, TOKEN_B):
                async with connect(server.url, token) as session:
                    await call(session, "terminal_list", {})
            async with connect(server.url, TOKEN_A) as session:
                await call(session, "no_such_tool", {})
    entries = audit_lines(tmp_path)
    assert [(e["agent"], e.get("identity")) for e in entries] == [
        ("agent-a", "agent-a"),
        ("agent-b", "agent-b"),
        ("agent-a", "agent-a"),
    ]
    assert entries[-1]["outcome"] == {"isError": True, "code": "UNKNOWN_TOOL"}


def test_the_server_refuses_to_start_with_an_unwritable_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"recording": {"dir": str(blocker / "casts")}}))
    run = subprocess.run(
        [sys.executable, "-m", "dsh_terminal_core.cli", "mcp", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "INVALID_CONFIG" in run.stderr and str(blocker / "casts") in run.stderr
