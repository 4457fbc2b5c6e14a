"""Both protocol eras, both transports, through clients nobody here wrote (SPEC §25, §19.5).

The MCP SDK's own ``mcp.Client`` on the stateless 2026-07-28 revision, and FastMCP's
``Client`` on 2026-07-28 (what it negotiates by default) and on 2025-11-25, each over
stdio (the client starts the server) and over HTTP (one server, one ``/mcp``). The
server is the real CLI in a subprocess. Waits are bounded and woken by what they wait
for; nothing is staged with a sleep.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

pytest.importorskip("mcp")
pytest.importorskip("fastmcp")

import mcp_types as types
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPError

from .mcp_clients import COMBINATIONS, IDS, LEGACY, MODERN, connect, text_of, value_of
from .test_mcp_http import TOKEN_A, TOKEN_B, http_server
from .test_mcp_notifications import Inbox

TEST_BOUND_S = 90
ARRIVAL_BOUND_S = 20
# A cancelled send's interruption and the next send's own round trip take milliseconds;
# this only bounds a broken build.
NEXT_SEND_BOUND_S = 1.5

Combination = tuple[str, str, str]


class Session:
    """One test's client, and the HTTP server it talks to when there is one."""

    def __init__(self, driver: Any, server: Any | None) -> None:
        self.driver = driver
        self.server = server

    async def call(self, name: str, args: dict[str, Any], timeout: float | None = None) -> Any:
        return await self.driver.call(name, args, timeout)

    async def open_shell(self) -> str:
        return str(value_of(await self.call("terminal_open", {"type": "shell"}))["sessionId"])


class _Connected:
    """``async with _Connected(...)``: a server for HTTP, then the client."""

    def __init__(self, combination: Combination, workspace: Path, **options: Any) -> None:
        self.framework, self.transport, self.era = combination
        self.workspace = workspace
        self.options = options
        self._stack: Any = None

    async def __aenter__(self) -> Session:
        import contextlib

        self._stack = contextlib.AsyncExitStack()
        await self._stack.__aenter__()
        server = None
        url = None
        if self.transport == "http":
            server = await self._stack.enter_async_context(http_server(self.workspace))
            url = server.url
        driver = await self._stack.enter_async_context(
            connect(
                self.framework,
                self.transport,
                self.era,
                self.workspace,
                url=url,
                token=TOKEN_A,
                **self.options,
            )
        )
        return Session(driver, server)

    async def __aexit__(self, *exc: object) -> None:
        await self._stack.__aexit__(*exc)


@pytest.mark.parametrize("combination", COMBINATIONS, ids=IDS)
async def test_the_whole_flow_on_the_negotiated_era(
    combination: Combination, tmp_path: Path
) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with _Connected(combination, tmp_path) as session:
            assert session.driver.protocol_version == combination[2]
            sid = await session.open_shell()
            sent = value_of(
                await session.call("terminal_send", {"sessionId": sid, "text": "echo hello"})
            )
            assert (sent["viewport"], sent["waitReason"], sent["exitCode"]) == (
                "hello\n",
                "stdin_read",
                0,
            )
            read = await session.call("terminal_read", {"sessionId": sid})
            assert "hello" in text_of(read)
            listed = value_of(await session.call("terminal_list", {}))
            assert [entry["sessionId"] for entry in listed["sessions"]] == [sid]
            closed = await session.call("terminal_close", {"sessionId": sid})
            assert not closed.is_error, text_of(closed)


@pytest.mark.parametrize("combination", COMBINATIONS, ids=IDS)
async def test_a_client_timeout_is_a_ctrl_c_and_the_next_send_is_accepted_at_once(
    combination: Combination, tmp_path: Path
) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with _Connected(combination, tmp_path) as session:
            sid = await session.open_shell()
            line = "echo started; sleep 5; echo SLEPT"
            with pytest.raises(MCPError) as timed_out:
                await session.call("terminal_send", {"sessionId": sid, "text": line}, 0.5)
            assert timed_out.value.code == types.REQUEST_TIMEOUT
            given_up = time.monotonic()
            after = await session.call("terminal_send", {"sessionId": sid, "text": "echo back"})
            took = time.monotonic() - given_up
            # Accepted on the first try: no SEND_ACTIVE, and sleep was interrupted (the
            # shell ran `echo back` at its prompt, so the line with SLEPT is over).
            value = value_of(after)
            assert (value["viewport"], value["waitReason"], value["exitCode"]) == (
                "back\n",
                "stdin_read",
                0,
            )
            assert took < NEXT_SEND_BOUND_S, f"the next send took {took * 1000:.0f} ms"
            page = value_of(
                await session.call("terminal_read", {"sessionId": sid, "offset": 1, "count": 500})
            )
            printed = [row for row in page["text"].splitlines() if "SLEPT" in row]
            assert all("echo SLEPT" in row for row in printed), printed


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_server_discover_is_answered_and_auto_negotiation_picks_2026(
    transport: str, tmp_path: Path
) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with _Connected(("sdk", transport, MODERN), tmp_path, mode="auto") as session:
            discovered = session.driver.session.discover_result
            assert isinstance(discovered, types.DiscoverResult)
            assert MODERN in discovered.supported_versions
            assert discovered.capabilities.tools is not None
            assert discovered.instructions and "terminal_send" in discovered.instructions
            assert session.driver.protocol_version == MODERN
            tools = await session.driver.client.list_tools()
            assert "terminal_send" in {tool.name for tool in tools.tools}
        async with _Connected(("fastmcp", transport, MODERN), tmp_path, mode="auto") as session:
            assert session.driver.protocol_version == MODERN


async def test_one_http_endpoint_serves_both_eras_to_one_identity(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path) as server,
            connect("fastmcp", "http", LEGACY, tmp_path, url=server.url, token=TOKEN_A) as old,
            connect("sdk", "http", MODERN, tmp_path, url=server.url, token=TOKEN_A) as new,
            connect("sdk", "http", MODERN, tmp_path, url=server.url, token=TOKEN_B) as other,
        ):
            assert (old.protocol_version, new.protocol_version) == (LEGACY, MODERN)
            sid = value_of(await old.call("terminal_open", {"type": "shell"}))["sessionId"]
            sent = value_of(
                await new.call("terminal_send", {"sessionId": sid, "text": "echo both-eras"})
            )
            assert sent["viewport"] == "both-eras\n"
            read = await old.call("terminal_read", {"sessionId": sid})
            assert "both-eras" in text_of(read)
            foreign = await other.call("terminal_send", {"sessionId": sid, "text": "echo no"})
            assert foreign.is_error and text_of(foreign).startswith("error [FOREIGN_SESSION]")
            await new.call("terminal_close", {"sessionId": sid})


@pytest.mark.parametrize("combination", COMBINATIONS, ids=IDS)
async def test_a_background_job_wakes_the_client(combination: Combination, tmp_path: Path) -> None:
    """2026-07-28 through ``subscriptions/listen``; 2025-11-25 on the standing stream."""
    _, transport, era = combination
    inbox = Inbox()
    streaming = anyio.Event()

    async def on_response(response: httpx2.Response) -> None:
        # A 2025-11-25 notification sent before the client's GET stream is open is lost
        # by the transport, so the job starts only once it is.
        if response.request.method == "GET" and response.status_code == 200:
            streaming.set()

    options: dict[str, Any] = {"logs": inbox}
    if combination[0] == "fastmcp":
        options["on_http_response"] = on_response
    with anyio.fail_after(TEST_BOUND_S):
        async with _Connected(combination, tmp_path, **options) as session:
            sid = await session.open_shell()
            if era == MODERN:
                async with listen(session.driver.session, tools_list_changed=True) as stream:
                    assert stream.honored.tools_list_changed is True
                    job = await _background(session, sid)
                    [message] = await inbox.wait_for(1)
                assert message.meta is not None
                assert message.meta["io.modelcontextprotocol/subscriptionId"] == (
                    stream.subscription_id
                )
            else:
                if transport == "http":
                    with anyio.fail_after(ARRIVAL_BOUND_S):
                        await streaming.wait()
                job = await _background(session, sid)
                [message] = await inbox.wait_for(1)
            assert (message.level, message.logger) == ("info", "dsh-terminal")
            assert isinstance(message.data, dict)
            assert (message.data["event"], message.data["sessionId"], message.data["jobId"]) == (
                "job_done",
                sid,
                job,
            )
            done = value_of(await session.call("job_output", {"jobId": job, "wait": True}))
            assert "DONE" in done["output"]


async def _background(session: Session, sid: str) -> str:
    started = value_of(
        await session.call(
            "terminal_send",
            {"sessionId": sid, "text": "sleep 0.2; echo DONE", "run_in_background": True},
        )
    )
    return str(started["jobId"])
