"""``dsh-terminal mcp --http`` driven by the MCP SDK's own streamable-HTTP client.

The server is the real CLI in a subprocess on 127.0.0.1 with a free port; tests read the
port from its ``listening on`` line. Cleanup is proved from the outside, as for stdio:
the server's descendants are collected with psutil while it runs, and after a reap or a
SIGTERM every one of them must be gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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

import httpx2
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from dsh_terminal_core.provider.census import still_running

SERVER = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp"]
TOKENS = {
    "tok-a-0123456789abcdef": "agent-a",
    "tok-b-fedcba9876543210": "agent-b",
}
TOKEN_A, TOKEN_B = TOKENS
WRONG_TOKEN = "tok-x-not-a-real-token-000"
TEST_BOUND_S = 120
EXIT_BOUND_S = 20
_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)/mcp")
PROTOCOL = "2025-11-25"


def _environ(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "DSH_MCP_TOKENS"}
    env.update(extra)
    return env


class HttpServer:
    """The server subprocess, its URL and its stderr."""

    def __init__(self, process: anyio.abc.Process, port: int, lines: list[str]) -> None:
        self.process = process
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.lines = lines
        self.line_added = anyio.Event()

    def added(self, line: str) -> None:
        self.lines.append(line)
        self.line_added.set()
        self.line_added = anyio.Event()

    async def wait_for_log(self, needle: str) -> None:
        """Wait until stderr has a line containing ``needle`` (woken by each new line)."""
        with anyio.fail_after(30):
            while not any(needle in line for line in self.lines):
                await self.line_added.wait()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    async def wait_exit(self) -> int:
        with anyio.fail_after(EXIT_BOUND_S):
            return await self.process.wait()


@contextlib.asynccontextmanager
async def http_server(
    workspace: Path, *extra: str, tokens: dict[str, str] | None = TOKENS
) -> AsyncIterator[HttpServer]:
    """Start the CLI on 127.0.0.1:0 with ``tokens`` in a 0600 file; SIGTERM it at the end."""
    command = [*SERVER, "--http", "127.0.0.1:0", "--sandbox", "danger-full-access"]
    command += ["--workspace", str(workspace), *extra]
    if tokens is not None:
        token_file = workspace / "tokens.json"
        token_file.write_text(json.dumps(tokens))
        token_file.chmod(0o600)
        command += ["--token-file", str(token_file)]
    process = await anyio.open_process(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=workspace,
        env=_environ(),
        start_new_session=True,
    )
    lines: list[str] = []
    ready = anyio.Event()
    found: list[int] = []
    servers: list[HttpServer] = []

    async def read_stderr() -> None:
        assert process.stderr is not None
        pending = b""
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            async for chunk in process.stderr:
                *complete, pending = (pending + chunk).split(b"\n")
                for raw in complete:
                    line = raw.decode(errors="replace")
                    if servers:
                        servers[0].added(line)
                    else:
                        lines.append(line)
                    if not found and (match := _LISTENING.search(line)):
                        found.append(int(match.group(1)))
                        servers.append(HttpServer(process, found[0], lines))
                        ready.set()
        ready.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stderr)
            with anyio.fail_after(60):
                await ready.wait()
            assert found, "the server exited before listening:\n" + "\n".join(lines)
            yield servers[0]
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(EXIT_BOUND_S):
                    await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await process.aclose()


@contextlib.asynccontextmanager
async def connect(
    url: str, token: str | None, *, terminate_on_close: bool = True
) -> AsyncIterator[ClientSession]:
    """An initialized SDK session over streamable HTTP, with ``token`` as bearer."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=terminate_on_close) as (
            read,
            write,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> types.CallToolResult:
    result = await session.call_tool(name, args)
    assert isinstance(result, types.CallToolResult)
    return result


def text_of(result: types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, types.TextContent)
    return first.text


def value_of(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    value: dict[str, Any] | None = result.structured_content
    assert value is not None
    return value


async def open_shell(session: ClientSession, name: str | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"type": "shell"}
    if name is not None:
        args["name"] = name
    return value_of(await call(session, "terminal_open", args))


async def send(session: ClientSession, sid: str, text: str, **extra: Any) -> dict[str, Any]:
    return value_of(await call(session, "terminal_send", {"sessionId": sid, "text": text, **extra}))


def descendants(pid: int) -> set[tuple[int, float]]:
    found: set[tuple[int, float]] = set()
    with contextlib.suppress(psutil.Error):
        for proc in psutil.Process(pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                found.add((proc.pid, proc.create_time()))
    return found


def tree(pid: int) -> set[tuple[int, float]]:
    """``pid`` and its descendants, as (pid, start time)."""
    try:
        root = {(pid, psutil.Process(pid).create_time())}
    except psutil.Error:
        return set()
    return root | descendants(pid)


def _cmdline(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return ""


async def wait_for_commands(server_pid: int, *markers: str) -> set[tuple[int, float]]:
    """Wait until every marker is in some descendant's command line; return all seen."""
    seen: set[tuple[int, float]] = set()
    with anyio.fail_after(20):
        while True:
            seen |= descendants(server_pid)
            lines = [_cmdline(pid) for pid, _ in seen]
            if all(any(marker in line for line in lines) for marker in markers):
                return seen
            await anyio.sleep(0.05)


async def wait_all_gone(procs: set[tuple[int, float]], bound_s: float = 20.0) -> list[int]:
    with anyio.move_on_after(bound_s):
        while still_running(procs):
            await anyio.sleep(0.05)
    return still_running(procs)


def assert_no_token_in(log: str) -> None:
    for token in (*TOKENS, WRONG_TOKEN):
        assert token not in log


# -- authentication --------------------------------------------------------------------


async def _raw_initialize(http: httpx2.AsyncClient, url: str, token: str) -> str:
    """Open an MCP session by hand and return its id (the SDK client keeps it private)."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    response = await http.post(url, json=init, headers=headers)
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    headers |= {"mcp-session-id": session_id, "mcp-protocol-version": PROTOCOL}
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=done, headers=headers)).status_code == 202
    return session_id


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for part in exc.exceptions for leaf in _leaves(part)]
    return [exc]


def _tool_call(session_id: str, authorization: str | None) -> tuple[dict[str, Any], dict[str, str]]:
    headers = {
        "Accept": "application/json, text/event-stream",
        "mcp-session-id": session_id,
        "mcp-protocol-version": PROTOCOL,
    }
    if authorization is not None:
        headers["Authorization"] = authorization
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "terminal_open", "arguments": {"type": "shell"}},
    }
    return body, headers


async def test_no_token_or_a_wrong_one_is_401_before_any_tool_runs(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with http_server(tmp_path) as server, httpx2.AsyncClient(timeout=30) as http:
            session_id = await _raw_initialize(http, server.url, TOKEN_A)
            for authorization in (
                None,
                f"Bearer {WRONG_TOKEN}",
                f"Bearer {TOKEN_A}x",
                f"Basic {TOKEN_A}",
                "Bearer",
            ):
                body, headers = _tool_call(session_id, authorization)
                refused = await http.post(server.url, json=body, headers=headers)
                assert refused.status_code == 401, (authorization, refused.text)
                assert refused.headers["www-authenticate"].startswith("Bearer")
                assert refused.json()["error"] == "invalid_token"
            # A valid token of another identity cannot use this identity's MCP session.
            body, headers = _tool_call(session_id, f"Bearer {TOKEN_B}")
            assert (await http.post(server.url, json=body, headers=headers)).status_code == 404
            assert descendants(server.pid) == set(), "a tool ran for a refused request"

            # The SDK client is refused too, at initialize.
            for token in (None, WRONG_TOKEN):
                with pytest.raises(BaseException) as caught:
                    async with connect(server.url, token):
                        pass
                assert any(isinstance(leaf, MCPError) for leaf in _leaves(caught.value))
            assert descendants(server.pid) == set()

            # The same request with the right token does run the tool.
            body, headers = _tool_call(session_id, f"Bearer {TOKEN_A}")
            accepted = await http.post(server.url, json=body, headers=headers)
            assert accepted.status_code == 200 and '"sessionId"' in accepted.text
            assert any(psutil.Process(pid).name() == "bash" for pid, _ in descendants(server.pid))
            health = await http.get(server.url.replace("/mcp", "/healthz"))
            assert health.status_code == 200
        assert await server.wait_exit() == 0
    assert "refused a request without a valid bearer token" in server.log
    assert_no_token_in(server.log)


# -- sessions outlive the connection ---------------------------------------------------


@pytest.mark.parametrize("terminate_on_close", [True, False], ids=["delete", "vanish"])
async def test_reconnect_finds_the_repl_and_reads_what_it_missed(
    tmp_path: Path, terminate_on_close: bool
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    code = (
        f"data = open({str(gate)!r}).read(); "
        "print('\\n'.join(f'away-{i}' for i in range(300))); print('done-' + data.strip())"
    )
    with anyio.fail_after(TEST_BOUND_S):
        async with http_server(tmp_path) as server:
            async with connect(server.url, TOKEN_A, terminate_on_close=terminate_on_close) as a:
                opened = await open_shell(a, "repl")
                sid, pid = opened["sessionId"], opened["pid"]
                started = await send(a, sid, "python3 -q")
                assert started["waitReason"] == "stdin_read"
                job = (await send(a, sid, code, run_in_background=True))["jobId"]
                seen = value_of(await call(a, "terminal_read", {"sessionId": sid}))
                before = seen["totalLines"]
            # Disconnected. The REPL prints only now, once the gate opens.
            await anyio.to_thread.run_sync(gate.write_text, "while-away\n")
            async with connect(server.url, TOKEN_A) as again:
                listed = value_of(await call(again, "terminal_list", {}))["sessions"]
                assert [(s["sessionId"], s["pid"]) for s in listed] == [(sid, pid)]
                # Same identity, so its job is still its own: wait for it, event-driven.
                finished = await call(again, "job_output", {"jobId": job, "wait": True})
                assert not finished.is_error, text_of(finished)
                missed = value_of(
                    await call(
                        again, "terminal_read", {"sessionId": sid, "offset": before, "count": 500}
                    )
                )
                assert missed["lineBegin"] == before
                lines = missed["text"].splitlines()
                away = [line for line in lines if line.startswith("away-")]
                assert away == [f"away-{i}" for i in range(300)]
                assert "done-while-away" in lines
                answer = await send(again, sid, "6*7")
                assert "42" in answer["viewport"] and answer["waitReason"] == "stdin_read"
        assert await server.wait_exit() == 0


async def test_two_tokens_never_see_each_others_sessions(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path) as server,
            connect(server.url, TOKEN_A) as a,
            connect(server.url, TOKEN_B) as b,
        ):
            sid = (await open_shell(a, "private"))["sessionId"]
            assert "secret-42" in (await send(a, sid, "echo secret-$((6*7))"))["viewport"]
            job = (await send(a, sid, "echo job-secret", run_in_background=True))["jobId"]
            value_of(await call(a, "job_output", {"jobId": job, "wait": True}))

            assert value_of(await call(b, "terminal_list", {})) == {"sessions": []}
            attempts: list[tuple[str, dict[str, Any]]] = [
                ("terminal_read", {"sessionId": sid}),
                ("terminal_read", {"sessionId": sid, "offset": 1, "count": 500}),
                ("terminal_send", {"sessionId": sid, "text": "echo pwned"}),
                ("terminal_signal", {"sessionId": sid, "signal": "SIGINT"}),
                ("terminal_close", {"sessionId": sid}),
            ]
            for name, args in attempts:
                refused = await call(b, name, args)
                assert refused.is_error, name
                assert text_of(refused).startswith("error [FOREIGN_SESSION]"), text_of(refused)
                assert "secret" not in text_of(refused)
                assert refused.structured_content is None
            foreign_job = await call(b, "job_output", {"jobId": job})
            assert foreign_job.is_error and "secret" not in text_of(foreign_job)

            # B's own session number follows A's, and A's session is untouched.
            own = (await open_shell(b))["sessionId"]
            assert own != sid
            read = value_of(await call(a, "terminal_read", {"sessionId": sid, "count": 500}))
            assert "secret-42" in read["text"] and "pwned" not in read["text"]
            assert [
                s["sessionId"] for s in value_of(await call(a, "terminal_list", {}))["sessions"]
            ] == [sid]


async def test_32_concurrent_clients_each_send_50_commands_correctly(tmp_path: Path) -> None:
    tokens = {f"tok-load-{n:02d}-0123456789": f"load-{n}" for n in range(8)}
    failures: list[str] = []

    async def client(url: str, token: str, k: int) -> None:
        async with connect(url, token) as session:
            sid = (await open_shell(session, f"c{k}"))["sessionId"]
            for j in range(50):
                result = await send(session, sid, f"echo c{k}-{j}")
                if (result["viewport"], result["waitReason"], result["exitCode"]) != (
                    f"c{k}-{j}\n",
                    "stdin_read",
                    0,
                ):
                    failures.append(f"client {k} send {j}: {result}")
            assert value_of(await call(session, "terminal_close", {"sessionId": sid}))["closed"]

    with anyio.fail_after(600):
        async with (
            http_server(tmp_path, tokens=tokens) as server,
            anyio.create_task_group() as tg,
        ):
            for k in range(32):
                tg.start_soon(client, server.url, list(tokens)[k % 8], k)
        assert await server.wait_exit() == 0
    assert failures == []


# -- lifetime --------------------------------------------------------------------------


@pytest.mark.parametrize("terminate_on_close", [True, False], ids=["delete", "vanish"])
async def test_an_idle_identity_is_reaped_with_its_process_tree(
    tmp_path: Path, terminate_on_close: bool
) -> None:
    """Only this test shortens the idle TTL: it is about that timeout.

    ``vanish``: the client goes without ending its MCP session, as a crashed one does;
    its closed connections still count as its disconnect.
    """
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path, "--idle-ttl-s", "2") as server,
            connect(server.url, TOKEN_B) as b,
        ):
            kept = (await open_shell(b, "kept"))["sessionId"]
            async with connect(server.url, TOKEN_A, terminate_on_close=terminate_on_close) as a:
                opened = await open_shell(a)
                sid = opened["sessionId"]
                await send(a, sid, "sleep 1001 &")
                await send(a, sid, "sleep 1000", run_in_background=True)
                repl = value_of(await call(a, "pty_open", {"command": "python3 -q -i"}))
                await wait_for_commands(server.pid, "sleep 1001", "sleep 1000", "python3 -q -i")
                # A's process trees: its shell and its pty session, with their descendants.
                procs = tree(opened["pid"]) | tree(repl["pid"])
                assert len(procs) >= 4
            # A disconnected; B stays connected (its GET stream is open) but makes no call.
            names = {pid: _cmdline(pid) for pid, _ in procs}
            left = await wait_all_gone(procs, bound_s=60)
            assert left == [], ([names.get(p) for p in left], server.log)
            await server.wait_for_log("identity 'agent-a' reaped")
            assert "'agent-b' reaped" not in server.log
            survived = await send(b, kept, "echo still-here")
            assert survived["viewport"] == "still-here\n"
            async with connect(server.url, TOKEN_A) as again:
                assert value_of(await call(again, "terminal_list", {})) == {"sessions": []}
                fresh = (await open_shell(again))["sessionId"]
                assert (await send(again, fresh, "echo new"))["viewport"] == "new\n"
        assert await server.wait_exit() == 0


async def test_reconnects_racing_the_reaper_see_all_or_nothing_repeatedly(
    tmp_path: Path,
) -> None:
    """With a TTL about as long as a reconnect, each reconnect lands before or after the reap.

    Either way the identity is whole: its shell is listed and answers, or it has no
    session and opens a new one. Never a listed session that is dead, never an error.
    """
    outcomes = {"kept": 0, "reaped": 0}
    with anyio.fail_after(300):
        async with http_server(tmp_path, "--idle-ttl-s", "0.15") as server:
            for i in range(50):
                async with connect(server.url, TOKEN_A) as session:
                    listed = value_of(await call(session, "terminal_list", {}))["sessions"]
                    if listed:
                        outcomes["kept"] += 1
                        assert len(listed) == 1 and listed[0]["status"]["kind"] == "running"
                        sid = listed[0]["sessionId"]
                    else:
                        outcomes["reaped"] += 1
                        sid = (await open_shell(session))["sessionId"]
                    answer = await send(session, sid, f"echo round-{i}")
                    assert answer["viewport"] == f"round-{i}\n"
                    assert answer["waitReason"] == "stdin_read"
        assert await server.wait_exit() == 0
    assert outcomes["kept"] + outcomes["reaped"] == 50


async def _send_ignoring_errors(session: ClientSession, sid: str, text: str) -> None:
    with contextlib.suppress(Exception):
        await session.call_tool("terminal_send", {"sessionId": sid, "text": text})


async def test_sigterm_with_busy_sessions_exits_0_and_leaves_nothing(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path) as server,
            connect(server.url, TOKEN_A) as a,
            connect(server.url, TOKEN_B) as b,
        ):
            busy = (await open_shell(a, "busy"))["sessionId"]
            await send(a, busy, "sleep 1001 & sleep 1000", run_in_background=True)
            await call(a, "pty_open", {"command": "python3 -q -i"})
            other = (await open_shell(b))["sessionId"]
            await send(b, other, "sleep 1002", run_in_background=True)
            fg = (await open_shell(a, "fg"))["sessionId"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(_send_ignoring_errors, a, fg, "sleep 999")
                procs = await wait_for_commands(
                    server.pid,
                    "sleep 999",
                    "sleep 1000",
                    "sleep 1001",
                    "sleep 1002",
                    "python3 -q -i",
                )
                os.kill(server.pid, signal.SIGTERM)
                assert await server.wait_exit() == 0
                tg.cancel_scope.cancel()
        assert await wait_all_gone(procs) == []
    assert "received SIGTERM" in server.log and "all sessions closed" in server.log
    assert_no_token_in(server.log)


# -- refusals at startup ---------------------------------------------------------------


async def _start_and_expect_refusal(tmp_path: Path, args: list[str], **env: str) -> str:
    with anyio.fail_after(60):
        process = await anyio.run_process(
            [*SERVER, "--sandbox", "danger-full-access", *args],
            check=False,
            stdin=subprocess.DEVNULL,
            cwd=tmp_path,
            env=_environ(**env),
        )
    err = process.stderr.decode()
    assert process.returncode == 2, err
    assert "listening on" not in err
    return err


async def test_a_non_loopback_bind_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    err = await _start_and_expect_refusal(tmp_path, ["--http", "0.0.0.0:0"])
    assert "refusing to serve" in err and "--token-file" in err
    # --no-auth off loopback refuses, tokens or not.
    tokens = json.dumps(TOKENS)
    for args in (["--http", "0.0.0.0:0", "--no-auth"], ["--http", "[::]:0", "--no-auth"]):
        err = await _start_and_expect_refusal(tmp_path, args, DSH_MCP_TOKENS=tokens)
        assert "--no-auth is only allowed on a loopback address" in err
    # Even on loopback, no token needs an explicit --no-auth.
    err = await _start_and_expect_refusal(tmp_path, ["--http", "127.0.0.1:0"])
    assert "refusing to serve" in err


async def test_a_malformed_token_table_refuses_without_echoing_tokens(tmp_path: Path) -> None:
    secret = "tok-leak-check-0123456789"
    for table in ({secret: ""}, {secret: "a", "short": "b"}, {secret: "a", f"{secret}2": "a"}):
        err = await _start_and_expect_refusal(
            tmp_path, ["--http", "127.0.0.1:0"], DSH_MCP_TOKENS=json.dumps(table)
        )
        assert "DSH_MCP_TOKENS" in err and secret not in err
        assert "'short'" not in err and '"short"' not in err
    err = await _start_and_expect_refusal(
        tmp_path, ["--http", "127.0.0.1:0", "--token-file", str(tmp_path / "missing.json")]
    )
    assert "cannot read token file" in err


async def test_no_auth_on_loopback_serves_one_identity_and_checks_the_host(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with http_server(tmp_path, "--no-auth", tokens=None) as server:
            async with connect(server.url, None) as first:
                sid = (await open_shell(first))["sessionId"]
            async with connect(server.url, None) as second:
                listed = value_of(await call(second, "terminal_list", {}))["sessions"]
                assert [s["sessionId"] for s in listed] == [sid]
            async with httpx2.AsyncClient(timeout=30) as http:
                rebound = await http.post(
                    server.url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={
                        "Host": "attacker.example:80",
                        "Accept": "application/json, text/event-stream",
                    },
                )
            assert rebound.status_code == 421
        assert await server.wait_exit() == 0
    assert "authentication is off" in server.log
