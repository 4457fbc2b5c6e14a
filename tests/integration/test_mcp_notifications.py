"""The server wakes its clients with logging notifications (SPEC §19.5, 2025-11-25 era).

Driven by the SDK's own clients, stdio and streamable HTTP, with ``logging_callback``.
A negative is never a sleep: each client's notifications leave the server in order on
one stream, so when a later one arrives alone, an earlier one that should not have been
sent was not. Over HTTP a client first waits until its standalone (GET) stream is open,
because a notification sent while it is not is lost by the transport, which would make
a missing notification prove nothing.

Cleanup is proved from the outside, as in the other MCP tests: every process the server
started while the test ran is gone once it has exited.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
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
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from .test_mcp_http import (
    TOKEN_A,
    TOKEN_B,
    call,
    descendants,
    http_server,
    open_shell,
    send,
    value_of,
    wait_all_gone,
)

SERVER = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp"]
TEST_BOUND_S = 90
ARRIVAL_BOUND_S = 20
JOB = "sleep 0.3; echo DONE"


class Inbox:
    """The logging notifications one client received, waking a waiter on each."""

    def __init__(self) -> None:
        self.messages: list[types.LoggingMessageNotificationParams] = []
        self._arrived = anyio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.messages.append(params)
        self._arrived.set()
        self._arrived = anyio.Event()

    async def wait_for(self, count: int) -> list[types.LoggingMessageNotificationParams]:
        """Wait (bounded) until ``count`` notifications have arrived in all."""
        with anyio.fail_after(ARRIVAL_BOUND_S):
            while len(self.messages) < count:
                await self._arrived.wait()
        return self.messages

    @property
    def jobs(self) -> list[str | None]:
        return [_data(message).get("jobId") for message in self.messages]


def _data(message: types.LoggingMessageNotificationParams) -> dict[str, Any]:
    assert isinstance(message.data, dict), message.data
    return message.data


def assert_job_done(message: types.LoggingMessageNotificationParams, sid: str, job: str) -> None:
    assert message.level == "info"
    assert message.logger == "dsh-terminal"
    data = _data(message)
    assert set(data) == {"event", "sessionId", "jobId", "summary"}, data
    assert (data["event"], data["sessionId"], data["jobId"]) == ("job_done", sid, job)
    assert job in data["summary"] and "completed" in data["summary"], data


async def set_level(session: ClientSession, level: types.LoggingLevel) -> None:
    # Deprecated by the SDK for the 2026 era only; this connection speaks 2025-11-25.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        setting = session.set_logging_level(level)
    await setting


async def background(session: ClientSession, sid: str) -> str:
    job: str = (await send(session, sid, JOB, run_in_background=True))["jobId"]
    return job


async def confirm_completed(session: ClientSession, job: str) -> None:
    """The job has ended, so its notice (queued with its end) has been offered to clients."""
    finished = value_of(await call(session, "job_output", {"jobId": job, "wait": True}))
    assert finished["status"] == "completed", finished
    assert "DONE" in finished["output"], finished


# -- stdio -----------------------------------------------------------------------------


def _server_processes() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children():
        with contextlib.suppress(psutil.Error):
            if "dsh_terminal_core.cli" in " ".join(child.cmdline()):
                found.append(child)
    return found


@contextlib.asynccontextmanager
async def stdio_session(workspace: Path, inbox: Inbox) -> AsyncIterator[ClientSession]:
    """An initialized session over the SDK's stdio client, which owns the server process."""
    command = [*SERVER, "--sandbox", "danger-full-access", "--workspace", str(workspace)]
    params = StdioServerParameters(command=command[0], args=command[1:], cwd=workspace)
    with (workspace / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, logging_callback=inbox) as session,
        ):
            await session.initialize()
            yield session


def _remember(seen: set[tuple[int, float]]) -> None:
    """Add the running server and its descendants, to prove later they are all gone."""
    for server in _server_processes():
        with contextlib.suppress(psutil.Error):
            seen.add((server.pid, server.create_time()))
            seen |= descendants(server.pid)


async def test_a_background_job_wakes_the_stdio_client(tmp_path: Path) -> None:
    inbox = Inbox()
    seen: set[tuple[int, float]] = set()
    with anyio.fail_after(TEST_BOUND_S):
        async with stdio_session(tmp_path, inbox) as session:
            sid = (await open_shell(session))["sessionId"]
            job = await background(session, sid)
            _remember(seen)
            [message] = await inbox.wait_for(1)
            assert_job_done(message, sid, job)
            # The next result still carries the same news as a [notice] line.
            listed = await call(session, "terminal_list", {})
            notices = [block.text for block in listed.content[1:] if block.type == "text"]
            assert notices == [f"[notice] {_data(message)['summary']}"], notices
            await confirm_completed(session, job)
            assert len(inbox.messages) == 1
        assert seen and await wait_all_gone(seen) == []


async def test_a_stdio_client_at_warning_is_sent_none(tmp_path: Path) -> None:
    inbox = Inbox()
    seen: set[tuple[int, float]] = set()
    with anyio.fail_after(TEST_BOUND_S):
        async with stdio_session(tmp_path, inbox) as session:
            sid = (await open_shell(session))["sessionId"]
            await set_level(session, "warning")
            quiet = await background(session, sid)
            _remember(seen)
            await confirm_completed(session, quiet)
            # Back to info: the next job's notification is the first this client gets.
            await set_level(session, "info")
            loud = await background(session, sid)
            [message] = await inbox.wait_for(1)
            assert_job_done(message, sid, loud)
            assert inbox.jobs == [loud]
        assert seen and await wait_all_gone(seen) == []


# -- HTTP ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def http_session(url: str, token: str, inbox: Inbox) -> AsyncIterator[ClientSession]:
    """An initialized SDK session over streamable HTTP whose standalone stream is open."""
    streaming = anyio.Event()

    async def on_response(response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            streaming.set()

    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        http.event_hooks["response"].append(on_response)
        async with (
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write, logging_callback=inbox) as session,
        ):
            await session.initialize()
            with anyio.fail_after(ARRIVAL_BOUND_S):
                await streaming.wait()
            yield session


async def test_http_wakes_the_identitys_client_and_never_another_identity(
    tmp_path: Path,
) -> None:
    a_inbox, b_inbox = Inbox(), Inbox()
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path) as server,
            http_session(server.url, TOKEN_A, a_inbox) as a,
            http_session(server.url, TOKEN_B, b_inbox) as b,
        ):
            a_sid = (await open_shell(a))["sessionId"]
            a_job = await background(a, a_sid)
            [message] = await a_inbox.wait_for(1)
            assert_job_done(message, a_sid, a_job)
            seen = descendants(server.pid)

            # B's own job wakes B; had A's notification reached B, it would be first.
            b_sid = (await open_shell(b))["sessionId"]
            b_job = await background(b, b_sid)
            [message] = await b_inbox.wait_for(1)
            assert_job_done(message, b_sid, b_job)
            assert b_inbox.jobs == [b_job]
            await confirm_completed(a, a_job)
            assert a_inbox.jobs == [a_job]
            seen |= descendants(server.pid)
        assert await server.wait_exit() == 0
        assert await wait_all_gone(seen) == []


async def test_http_wakes_every_client_of_the_identity_but_one_at_warning(
    tmp_path: Path,
) -> None:
    loud_inbox, quiet_inbox = Inbox(), Inbox()
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            http_server(tmp_path) as server,
            http_session(server.url, TOKEN_A, loud_inbox) as loud,
            http_session(server.url, TOKEN_A, quiet_inbox) as quiet,
        ):
            await set_level(quiet, "warning")
            sid = (await open_shell(quiet))["sessionId"]
            first = await background(quiet, sid)
            # Announced: the identity's other client is woken by it.
            [message] = await loud_inbox.wait_for(1)
            assert_job_done(message, sid, first)
            await confirm_completed(loud, first)  # the identity's job, either client
            seen = descendants(server.pid)

            await set_level(quiet, "info")
            second = await background(quiet, sid)
            [message] = await quiet_inbox.wait_for(1)
            assert_job_done(message, sid, second)
            assert quiet_inbox.jobs == [second]
            await loud_inbox.wait_for(2)
            assert loud_inbox.jobs == [first, second]
        assert await server.wait_exit() == 0
        assert await wait_all_gone(seen) == []


async def test_a_background_wait_for_match_wakes_the_client_with_matched(tmp_path: Path) -> None:
    inbox = Inbox()
    seen: set[tuple[int, float]] = set()
    with anyio.fail_after(TEST_BOUND_S):
        async with stdio_session(tmp_path, inbox) as session:
            sid = (await open_shell(session))["sessionId"]
            text = "sleep 0.2; echo 'Listening on 127.0.0.1:9'; sleep 30"
            started = await send(
                session, sid, text, waitFor="^Listening on", run_in_background=True
            )
            job = started["jobId"]
            _remember(seen)
            # The match, then the job it completed: two events, in that order.
            first, second = await inbox.wait_for(2)
            data = _data(first)
            assert (data["event"], data["sessionId"], data["jobId"]) == ("matched", sid, job)
            assert "Listening on 127.0.0.1:9" in data["summary"]
            assert_job_done(second, sid, job)
            await call(session, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        assert seen and await wait_all_gone(seen) == []
