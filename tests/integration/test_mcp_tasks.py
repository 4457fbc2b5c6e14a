"""MCP tasks on 2026-07-28 (SEP-2663, SPEC §30.2) with the MCP SDK's own client.

The client declares ``io.modelcontextprotocol/tasks`` through the SDK's extension API
(:class:`mcp.client.extension.ClientExtension`) and claims ``resultType: "task"``
results: its resolver polls ``tasks/get``, hands each ``input_required`` ask to the
person (the test's elicitation handler) and answers with ``tasks/update``, exactly the
client half FastMCP's ``fastmcp-tasks`` ships (which pins an older FastMCP than this
project's, so it cannot be installed beside it). The server is the real CLI over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import psutil
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, NotificationBinding, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict, Field

from dsh_terminal_core.mcp.tasks import TASKS_EXTENSION

from ..human.support import request
from ..secrets.support import digest
from ..secrets.test_secret_mcp import SECRET, submit
from .mcp_clients import MODERN
from .test_mcp_http import TOKEN_A, http_server

BOUND_S = 120
PROMPT = "read -r -s -p 'Vault password: ' pw"
Person = Callable[[types.ElicitRequestURLParams], Awaitable[types.ElicitResult]]


class CreatedTask(types.Result):
    """The claimed ``tools/call`` result: a task's fields at top level."""

    model_config = ConfigDict(populate_by_name=True, extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str


class TaskParams(types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(serialization_alias="inputResponses")


class TaskRequest(types.Request[TaskParams, str]):
    method: str
    params: TaskParams


class UpdateRequest(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams


class TaskState(types.Result):
    model_config = ConfigDict(extra="allow")


class TaskNote(types.NotificationParams):
    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")
    status: str


class Tasks(ClientExtension):
    """The client half of the tasks extension, on the SDK's extension API."""

    identifier = TASKS_EXTENSION

    def __init__(self, person: Person | None = None) -> None:
        self.person = person
        self.created: list[str] = []
        self.statuses: list[str] = []
        self.asks: list[dict[str, Any]] = []
        self.noted: list[str] = []  # statuses announced by notifications/tasks

    def notifications(self) -> list[NotificationBinding[Any]]:
        return [
            NotificationBinding(
                method="notifications/tasks", params_type=TaskNote, handler=self._note
            )
        ]

    async def _note(self, params: TaskNote) -> None:
        self.noted.append(params.status)

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created.task_id)
        while True:
            state = await get(ctx.session, created.task_id)
            status = state["status"]
            if not self.statuses or self.statuses[-1] != status:
                self.statuses.append(status)
            if status == "completed":
                return types.CallToolResult.model_validate(state["result"])
            if status in ("failed", "cancelled"):
                raise RuntimeError(f"task {status}: {state}")
            if status == "input_required":
                answers = {}
                for key, ask in state["inputRequests"].items():
                    self.asks.append(ask)
                    params = types.ElicitRequestURLParams.model_validate(ask["params"])
                    assert self.person is not None
                    answer = await self.person(params)
                    answers[key] = answer.model_dump(by_alias=True, exclude_none=True)
                await ctx.session.send_request(
                    UpdateRequest(
                        params=UpdateParams(task_id=created.task_id, input_responses=answers)
                    ),
                    types.Result,
                )
            await anyio.sleep(0.05)


async def get(session: Any, task_id: str) -> dict[str, Any]:
    state = await session.send_request(
        TaskRequest(method="tasks/get", params=TaskParams(task_id=task_id)), TaskState
    )
    return state.model_dump(by_alias=True)


async def cancel(session: Any, task_id: str) -> None:
    await session.send_request(
        TaskRequest(method="tasks/cancel", params=TaskParams(task_id=task_id)), types.Result
    )


@contextlib.asynccontextmanager
async def tasks_client(url: str, extension: ClientExtension | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {TOKEN_A}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=MODERN,
            extensions=[extension] if extension is not None else [],
        ) as client,
    ):
        yield client


async def _open(client: Client) -> str:
    opened = await client.call_tool("terminal_open", {"type": "shell"})
    assert opened.structured_content is not None
    return str(opened.structured_content["sessionId"])


async def test_ask_human_completes_through_a_task(tmp_path: Path) -> None:
    helped: list[asyncio.Task[None]] = []

    async def help_out(url: str) -> None:
        assert (await request("POST", url + "/control", {"action": "take"})).status == 200
        await request("POST", url + "/keys", {"data": "echo from-person\r"})
        await request("POST", url + "/control", {"action": "hand_back"})

    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        assert "take over terminal session" in params.message
        helped.append(asyncio.ensure_future(help_out(params.url)))
        return types.ElicitResult(action="accept")

    extension = Tasks(person)
    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server, tasks_client(server.url, extension) as client:
            assert client.session.protocol_version == MODERN
            sid = await _open(client)
            async with client.listen(tools_list_changed=True):
                asked = await client.call_tool(
                    "terminal_ask_human", {"sessionId": sid, "reason": "log in to the VPN"}
                )
                while "completed" not in extension.noted:  # announced on the listen stream
                    await anyio.sleep(0.02)
            assert asked.structured_content is not None, asked
            assert asked.structured_content["outcome"] == "handed_back", asked
            await helped[0]
            read = await client.call_tool(
                "terminal_read",
                {"sessionId": sid, "offset": asked.structured_content["human"]["lineBegin"]},
            )
            assert "from-person" in str(read.structured_content)
    assert len(extension.created) == 1  # the ask ran as a task ...
    assert "input_required" in extension.statuses  # ... that waited for the person
    assert extension.asks[0]["params"]["mode"] == "url"
    assert extension.noted[0] == "input_required" and "working" in extension.noted


@contextlib.asynccontextmanager
async def stdio_tasks_client(workspace: Path, extension: ClientExtension) -> AsyncIterator[Client]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    args = ["-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
    params = StdioServerParameters(
        command=sys.executable, args=[*args, "--workspace", str(workspace)], cwd=workspace
    )
    with (workspace / "server.log").open("w") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode=MODERN, extensions=[extension]
        ) as client:
            yield client


@contextlib.asynccontextmanager
async def over(
    transport: str, workspace: Path, extension: ClientExtension
) -> AsyncIterator[tuple[Client, Callable[[], str]]]:
    """A tasks client over ``transport``, and a reader of the server's log."""
    if transport == "stdio":
        async with stdio_tasks_client(workspace, extension) as client:
            yield client, (workspace / "server.log").read_text
        return
    async with http_server(workspace) as server, tasks_client(server.url, extension) as client:
        yield client, lambda: server.log


@pytest.mark.parametrize("transport", ["http", "stdio"])
async def test_a_secret_ask_completes_through_a_task(transport: str, tmp_path: Path) -> None:
    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        assert "Vault password:" in params.message and "/secret/" in params.url
        sent = await submit(params.url, SECRET)
        assert sent.status_code == 200, sent.text
        return types.ElicitResult(action="accept")

    extension = Tasks(person)
    seen: list[str] = []
    with anyio.fail_after(BOUND_S):
        async with over(transport, tmp_path, extension) as (client, server_log):
            assert client.session.protocol_version == MODERN
            sid = await _open(client)
            waiting = await client.call_tool("terminal_send", {"sessionId": sid, "text": PROMPT})
            assert waiting.structured_content is not None
            assert waiting.structured_content["inputHidden"] is True
            typed = await client.call_tool(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
            )
            seen.append(repr(typed))
            assert not typed.is_error, typed
            shown = await client.call_tool(
                "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
            )
            seen.append(repr(shown))
            assert digest(SECRET) in str(shown.structured_content)
        seen.append(server_log())
    assert len(extension.created) == 1 and "input_required" in extension.statuses
    assert all(SECRET not in text for text in seen) and SECRET not in repr(extension.asks)


async def test_a_cancelled_task_is_a_ctrl_c_and_the_session_takes_the_next_send(
    tmp_path: Path,
) -> None:
    """A long send becomes a task; ``tasks/cancel`` interrupts it (measured, not asserted)."""
    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server, tasks_client(server.url, Tasks()) as client:
            session = client.session
            sid = await _open(client)
            created = await session.send_request(
                types.CallToolRequest(
                    params=types.CallToolRequestParams(
                        name="terminal_send",
                        arguments={
                            "sessionId": sid,
                            "text": "sleep 30; echo SLEPT",
                            "timeoutMs": 60000,
                        },
                    )
                ),
                CreatedTask,
            )
            assert created.status == "working"
            started = time.perf_counter()
            await cancel(session, created.task_id)
            cancel_ms = (time.perf_counter() - started) * 1000
            state = await get(session, created.task_id)
            assert state["status"] == "cancelled", state
            started = time.perf_counter()
            after = await client.call_tool(
                "terminal_send", {"sessionId": sid, "text": "echo after"}
            )
            next_ms = (time.perf_counter() - started) * 1000
            assert not after.is_error, after
            assert after.structured_content is not None
            assert after.structured_content.get("exitCode") == 0, after
            assert "after" in after.structured_content["viewport"], after
            assert "SLEPT" not in str(after.structured_content)
            print(f"\ntasks/cancel answered in {cancel_ms:.1f} ms; next send {next_ms:.1f} ms")
            del server


async def test_without_the_extension_calls_stay_synchronous_and_tasks_are_refused(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server, tasks_client(server.url, None) as client:
            sid = await _open(client)
            slow = await client.call_tool(
                "terminal_send", {"sessionId": sid, "text": "sleep 1; echo DONE"}
            )
            assert (
                slow.structured_content is not None
                and "DONE" in slow.structured_content["viewport"]
            )
            with pytest.raises(MCPError) as refused:
                await get(client.session, "no-such-task")
            assert refused.value.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY
            ask = await client.call_tool(
                "terminal_ask_human", {"sessionId": sid, "reason": "nobody"}
            )
            assert ask.structured_content is not None
            assert ask.structured_content["outcome"] == "unavailable"  # as before: no tasks
            del server


FASTMCP_TASKS = Path(__file__).parents[2] / ".fastmcp-tasks"
DRIVER = Path(__file__).with_name("fastmcp_tasks_driver.py")


@pytest.mark.skipif(
    not (FASTMCP_TASKS / "fastmcp_tasks").is_dir(),
    reason=f"fastmcp-tasks is not installed in {FASTMCP_TASKS} (./scripts/install.sh --test)",
)
async def test_fastmcp_tasks_client_asks_the_person_and_types_the_secret(tmp_path: Path) -> None:
    """FastMCP's own tasks client (``fastmcp-tasks``), in a process of its own."""
    env = {**os.environ, "DSH_TEST_SECRET": SECRET}
    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server:
            done = await anyio.run_process(
                [sys.executable, str(DRIVER), server.url, TOKEN_A, str(FASTMCP_TASKS)],
                env=env,
                check=False,
            )
            log = server.log
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    out = json.loads(done.stdout)
    assert out["protocol"] == MODERN and out["fastmcp_tasks"] == "4.1.4"
    assert out["ask_human"]["outcome"] == "handed_back", out
    assert out["waiting"]["inputHidden"] is True
    assert out["typed"]["waitReason"] == "stdin_read", out["typed"]
    assert digest(SECRET) in out["shown"]["viewport"]
    assert "SLOW-DONE" in out["slow"]["viewport"]  # a 2 s send, resolved through its task
    assert [ask["mode"] for ask in out["asked"]] == ["url", "url"]
    methods = out["methods"]
    assert methods.count("tools/call") == 6 and "tasks/update" in methods, methods
    assert methods.count("tasks/get") >= 3, methods  # ask, secret and the slow send polled
    assert SECRET not in json.dumps(out) and SECRET not in log


def _sleepers(marker: str) -> list[int]:
    return [
        proc.pid
        for proc in psutil.process_iter(["cmdline"])
        if proc.info["cmdline"] and marker in " ".join(proc.info["cmdline"])
    ]


async def test_a_task_running_at_shutdown_is_interrupted_and_its_process_gone(
    tmp_path: Path,
) -> None:
    marker = "sleep 313.25"
    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server:
            async with tasks_client(server.url, Tasks()) as client:
                sid = await _open(client)
                created = await client.session.send_request(
                    types.CallToolRequest(
                        params=types.CallToolRequestParams(
                            name="terminal_send",
                            arguments={"sessionId": sid, "text": marker, "timeoutMs": 600000},
                        )
                    ),
                    CreatedTask,
                )
                assert created.status == "working" and _sleepers(marker)
            server.process.send_signal(signal.SIGTERM)
            assert await server.process.wait() == 0, server.log
    assert _sleepers(marker) == []


async def test_a_declined_secret_ask_ends_the_task_with_secret_declined(tmp_path: Path) -> None:
    urls: list[str] = []

    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        urls.append(params.url)
        return types.ElicitResult(action="decline")

    extension = Tasks(person)
    with anyio.fail_after(BOUND_S):
        async with over("http", tmp_path, extension) as (client, _log):
            sid = await _open(client)
            await client.call_tool("terminal_send", {"sessionId": sid, "text": PROMPT})
            refused = await client.call_tool(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
            )
            assert refused.is_error
            assert refused.content[0].text.startswith("error [SECRET_DECLINED]"), refused  # type: ignore[union-attr]
            assert (await submit(urls[0], "late")).status_code == 410  # the page is withdrawn
    assert extension.statuses[-1] == "completed" and "input_required" in extension.statuses
