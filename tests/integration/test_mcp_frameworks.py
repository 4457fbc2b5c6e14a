"""``dsh-terminal mcp`` driven by client frameworks nobody here wrote (SPEC §25.3–25.5).

FastMCP's ``Client`` checks every structured result against the tool's declared
``outputSchema`` (the SDK session it runs raises on a mismatch, and FastMCP builds a
typed value from the schema, which is ``data``). pydantic-ai's ``MCPToolset`` hands its
model only the structured result when every content block is text, so whatever the
model must know — a background job's notice, where the next page starts — has to be in
it; its ``TestModel`` calls every tool with arguments generated from the schemas, and a
scripted ``FunctionModel`` plays an agent's turns.

Both clients negotiate the stateless 2026-07-28 revision by default; another part of
SPEC §25 serves it. These tests pin the 2025-11-25 revision (FastMCP ``mode="legacy"``:
the initialize handshake), the one the defects were found on. The server is started by
the client over stdio; every process seen under this test while it ran must be gone
once the client has disconnected.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

pytest.importorskip("fastmcp")
pytest.importorskip("pydantic_ai")

import mcp_types
from fastmcp import Client
from fastmcp.client.client import CallToolResult
from fastmcp.client.logging import LogMessage
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent, RunContext
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer
from pydantic_ai.tools import ToolDefinition

from .test_mcp import descendants, wait_all_gone

PROTOCOL = "2025-11-25"
TEST_BOUND_S = 90
# TestModel's arguments for ssh_open name a host "a": a lookup that leaves this machine.
NOT_CALLED = ("ssh_",)

Seen = set[tuple[int, float]]


def stdio_client(workspace: Path, **options: Any) -> Client[StdioTransport]:
    """A FastMCP client that starts ``dsh-terminal mcp`` itself, on protocol 2025-11-25.

    The environment is passed whole so the suite's run marker reaches the shells (the
    leak check counts them), and ``keep_alive=False`` makes the disconnect end the
    server instead of keeping it for a later connection.
    """
    transport = StdioTransport(
        command=sys.executable,
        args=[
            "-m",
            "dsh_terminal_core.cli",
            "mcp",
            "--sandbox",
            "danger-full-access",
            "--workspace",
            str(workspace),
        ],
        env=dict(os.environ),
        cwd=str(workspace),
        keep_alive=False,
    )
    return Client(transport, mode="legacy", timeout=30, **options)


@contextlib.asynccontextmanager
async def cleanup_proven() -> AsyncIterator[Callable[[], None]]:
    """Yield ``note()``, which records the processes under this test; prove them gone after.

    The test calls ``note()`` while its client is connected (the server, its shells and
    their children are there); once the block ends every one of them must have ended.
    """
    before = descendants(os.getpid())
    seen: Seen = set()

    def note() -> None:
        seen.update(descendants(os.getpid()) - before)

    yield note
    assert seen, "the server was never seen running"
    assert await wait_all_gone(seen) == []


@dataclasses.dataclass(frozen=True)
class Called:
    """A successful call as FastMCP returned it: the structured value, the typed value
    FastMCP built from the output schema, and the text blocks."""

    value: dict[str, Any]
    data: Any
    texts: list[str]


async def ok(client: Client[Any], name: str, args: dict[str, Any]) -> Called:
    """Call ``name``; FastMCP raises on a tool error and on a result its schema refuses."""
    result = await client.call_tool(name, args)
    assert result.structured_content is not None, name
    # ``data`` is the value FastMCP built from the output schema: None would mean the
    # schema and the value disagree (FastMCP logs that instead of raising).
    assert result.data is not None, (name, result.structured_content)
    return Called(value=result.structured_content, data=result.data, texts=texts(result))


async def refused(client: Client[Any], name: str, args: dict[str, Any]) -> str:
    result = await client.call_tool(name, args, raise_on_error=False)
    assert result.is_error, (name, result.structured_content)
    first = result.content[0]
    assert isinstance(first, mcp_types.TextContent)
    return first.text


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]


class Wakes:
    """The ``job_done`` wake-ups the server sends (SPEC §19.5), to wait on without polling."""

    def __init__(self) -> None:
        self.jobs: list[str] = []
        self.changed = anyio.Event()

    async def __call__(self, message: LogMessage) -> None:
        data = message.data
        if isinstance(data, dict) and data.get("event") == "job_done":
            self.jobs.append(str(data.get("jobId")))
            self.changed.set()

    async def wait_for(self, job_id: str) -> None:
        with anyio.fail_after(15):
            while job_id not in self.jobs:
                self.changed = anyio.Event()
                await self.changed.wait()


# -- FastMCP ---------------------------------------------------------------------------


async def test_fastmcp_flow_every_structured_result_matches_its_schema(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note, stdio_client(tmp_path) as client:
            assert client.protocol_version == PROTOCOL
            tools = await client.list_tools()
            for tool in tools:
                assert tool.output_schema is not None, tool.name
                assert "notices" in tool.output_schema["properties"], tool.name

            opened = await ok(client, "terminal_open", {"name": "main"})
            sid = opened.value["sessionId"]
            sent = await ok(client, "terminal_send", {"sessionId": sid, "text": "echo hi"})
            assert (sent.data.viewport, sent.data.waitReason, sent.data.exitCode) == (
                "hi\n",
                "stdin_read",
                0,
            )
            note()

            # Paging: the hint the text has is a field too (before: text only).
            await ok(client, "terminal_send", {"sessionId": sid, "text": "seq 1 30"})
            page = await ok(client, "terminal_read", {"sessionId": sid, "offset": 1, "count": 5})
            assert page.value["more"] == {"offset": 6}
            assert page.texts[0].endswith("[more: terminal_read offset=6]")
            rest = await ok(client, "terminal_read", {"sessionId": sid, "offset": 6})
            assert "more" not in rest.value  # the last page says so by omission
            refusal = await refused(client, "terminal_read", {"sessionId": sid, "offset": 0})
            assert refusal.startswith("error [INVALID_ARGUMENT]") and ">= 1" in refusal

            # {sessionId} alone, which the schema allows, waits without typing (before:
            # INVALID_ARGUMENT "needs text").
            waited = await ok(client, "terminal_send", {"sessionId": sid})
            assert (waited.data.viewport, waited.data.waitReason) == ("", "stdin_read")
            # What a strict-mode model sends: every argument, the unused ones null.
            strict = {
                "sessionId": sid,
                "text": "echo strict",
                "keys": None,
                "secret": None,
                "submit": None,
                "timeoutMs": None,
                "waitFor": None,
                "run_in_background": None,
            }
            assert (await ok(client, "terminal_send", strict)).data.viewport == "strict\n"

            # Which surface opened each session (before: not said).
            pty = await ok(client, "pty_open", {"command": "echo from-pty"})
            note()
            listed = await ok(client, "terminal_list", {})
            opened_by = {s["sessionId"]: s["openedBy"] for s in listed.value["sessions"]}
            assert opened_by == {sid: "terminal", pty.value["sessionId"]: "pty"}
            assert "opened by pty" in listed.texts[0]

            closed = await ok(client, "terminal_close", {"sessionId": sid})
            assert closed.data.closed is True
            await ok(client, "pty_close", {"id": pty.value["sessionId"]})


async def test_fastmcp_background_notice_rides_in_the_structured_result(tmp_path: Path) -> None:
    wakes = Wakes()
    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note, stdio_client(tmp_path, log_handler=wakes) as client:
            sid = (await ok(client, "terminal_open", {})).value["sessionId"]
            job = (
                await ok(
                    client,
                    "terminal_send",
                    {
                        "sessionId": sid,
                        "text": "sleep 0.2; echo bg-done",
                        "run_in_background": True,
                    },
                )
            ).value["jobId"]
            note()
            await wakes.wait_for(job)

            # The next result carries the notice in both forms (before: text block only).
            listed = await ok(client, "terminal_list", {})
            [notice] = listed.value["notices"]
            assert notice["kind"] == "job_finished"
            assert (notice["jobId"], notice["sessionId"], notice["status"]) == (
                job,
                sid,
                "completed",
            )
            assert f"background job {job}" in notice["text"]
            assert f"[notice] {notice['text']}" in listed.texts
            again = await ok(client, "terminal_list", {})
            assert "notices" not in again.value  # each notice is told once

            # A job whose end job_output reports first: its notice is not told again
            # (before: the next result repeated it).
            second = (
                await ok(
                    client,
                    "terminal_send",
                    {"sessionId": sid, "text": "echo second", "run_in_background": True},
                )
            ).value["jobId"]
            await wakes.wait_for(second)
            output = await ok(client, "job_output", {"jobId": second, "wait": True})
            assert output.value["status"] == "completed"
            assert "notices" not in output.value
            after = await ok(client, "terminal_list", {})
            assert "notices" not in after.value
            assert not any(text.startswith("[notice]") for text in after.texts)


async def test_fastmcp_send_to_an_exited_session_is_session_exited(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note, stdio_client(tmp_path) as client:
            sid = (await ok(client, "terminal_open", {})).value["sessionId"]
            note()
            # A send in flight when the shell exits still settles, as session_exit.
            ended = await ok(client, "terminal_send", {"sessionId": sid, "text": "exit 3"})
            assert ended.data.waitReason == "session_exit"
            # A send after that is refused, as terminal_resize is (before: a success).
            text = await refused(client, "terminal_send", {"sessionId": sid, "text": "echo x"})
            assert text.startswith("error [SESSION_EXITED]") and "exit code 3" in text
            resize = await refused(
                client, "terminal_resize", {"sessionId": sid, "rows": 30, "cols": 90}
            )
            assert resize.startswith("error [SESSION_EXITED]")
            # The pty tools refuse the same way and point to pty tools (before: to
            # terminal_list).
            pid = (await ok(client, "pty_open", {"command": "exit 4"})).value
            assert pid["status"]["kind"] == "exited"
            text = await refused(client, "pty_send", {"id": pid["sessionId"], "data": "echo x"})
            assert text.startswith("error [SESSION_EXITED]") and "pty_open" in text
            assert "terminal_" not in text
            missing = await refused(client, "pty_tail", {"id": "pty-99"})
            assert missing.startswith("error [NO_SESSION]") and "terminal_" not in missing
            assert "pty_open" in missing
            await ok(client, "terminal_close", {"sessionId": sid})
            await ok(client, "pty_close", {"id": pid["sessionId"]})


# -- pydantic-ai -----------------------------------------------------------------------


def toolset_for(client: Client[Any], **options: Any) -> MCPToolset[None]:
    return MCPToolset(client, **options)


def parts(messages: list[ModelMessage]) -> list[Any]:
    return [part for message in messages for part in message.parts]


async def test_pydantic_ai_test_model_calls_every_tool_without_a_schema_error(
    tmp_path: Path,
) -> None:
    """Every tool, with the arguments TestModel generates from its schema.

    Its generated ids (``sessionId: "a"``) name no session, so those calls fail with
    ``NO_SESSION``: ``tool_error_behavior="failed"`` shows the model such failures
    without a retry. What must never come back is a refusal of arguments the schema
    itself produced (``INVALID_ARGUMENT``; before, ``terminal_send`` had one every run).
    """
    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note:
            client = stdio_client(tmp_path)
            toolset = toolset_for(client, tool_error_behavior="failed").filtered(
                lambda _ctx, tool: not tool.name.startswith(NOT_CALLED)
            )
            agent = Agent(TestModel(call_tools="all"), toolsets=[toolset])
            async with agent:
                assert client.protocol_version == PROTOCOL
                listed = await client.list_tools()
                result = await agent.run("use every tool")
                note()
            called = {
                p.tool_name for p in parts(result.all_messages()) if isinstance(p, ToolCallPart)
            }
            returns = [p for p in parts(result.all_messages()) if isinstance(p, ToolReturnPart)]
            expected = {t.name for t in listed if not t.name.startswith(NOT_CALLED)}
            assert called == expected
            assert len(expected) >= 14
            assert not [p for p in parts(result.all_messages()) if isinstance(p, RetryPromptPart)]
            schema_errors = [
                (p.tool_name, p.content)
                for p in returns
                if "INVALID_ARGUMENT" in str(p.content) or p.outcome == "retried"
            ]
            assert schema_errors == []
            # The tools TestModel could call for real succeeded.
            outcome = {p.tool_name: p.outcome for p in returns}
            assert outcome["terminal_open"] == outcome["terminal_list"] == "success"
            assert outcome["pty_open"] == "success"


async def test_pydantic_ai_test_model_sends_to_a_real_session_with_no_retry(
    tmp_path: Path,
) -> None:
    """TestModel's ``{sessionId}`` for ``terminal_send``, on a session that exists.

    The schemas are offered with an ``examples`` value naming that session, which
    TestModel uses instead of ``"a"``; the run keeps pydantic-ai's default retry
    behaviour, so one refusal would be a retry (and, repeated, a failed run).
    """
    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note:
            client = stdio_client(tmp_path)
            toolset = toolset_for(client)
            sid = ""

            async def name_the_session(
                _ctx: RunContext[None], tool_defs: list[ToolDefinition]
            ) -> list[ToolDefinition]:
                prepared = []
                for tool_def in tool_defs:
                    schema = dict(tool_def.parameters_json_schema)
                    properties = dict(schema["properties"])
                    properties["sessionId"] = {**properties["sessionId"], "examples": [sid]}
                    schema["properties"] = properties
                    prepared.append(dataclasses.replace(tool_def, parameters_json_schema=schema))
                return prepared

            driven = toolset.filtered(
                lambda _ctx, tool: tool.name in ("terminal_send", "terminal_read")
            ).prepared(name_the_session)
            agent = Agent(TestModel(call_tools="all"), toolsets=[driven])
            async with toolset:
                opened = await toolset.direct_call_tool("terminal_open", {})
                sid = opened["sessionId"]
                note()
                result = await agent.run("wait for the shell, then read it")
            every = parts(result.all_messages())
            calls = {p.tool_name: p.args for p in every if isinstance(p, ToolCallPart)}
            assert calls["terminal_send"] == {"sessionId": sid}
            assert not [p for p in every if isinstance(p, RetryPromptPart)]
            returns = {p.tool_name: p for p in every if isinstance(p, ToolReturnPart)}
            assert {p.outcome for p in returns.values()} == {"success"}
            sent = returns["terminal_send"].content
            assert isinstance(sent, dict) and sent["waitReason"] == "stdin_read"
            assert result.usage.tool_calls == 2


async def test_pydantic_ai_function_model_sees_the_notice(tmp_path: Path) -> None:
    """A scripted agent: open, send ``echo hi``, read, start a background job, list, close.

    The model function gets what pydantic-ai hands a model: for our results, the
    structured value alone. The job's end reaches it as that value's ``notices``.
    """
    seen: list[Any] = []
    wakes = Wakes()

    def last_return(messages: list[ModelMessage]) -> Any:
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        [returned] = [p for p in request.parts if isinstance(p, ToolReturnPart)]
        assert returned.outcome == "success", returned.content
        seen.append(returned.content)
        return returned.content

    async def script(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        turn = sum(isinstance(m, ModelResponse) for m in messages)
        if turn == 0:
            return ModelResponse(parts=[ToolCallPart("terminal_open", {})])
        last_return(messages)
        sid = seen[0]["sessionId"]
        steps: dict[int, tuple[str, dict[str, Any]]] = {
            1: ("terminal_send", {"sessionId": sid, "text": "echo hi"}),
            2: ("terminal_read", {"sessionId": sid}),
            3: ("terminal_send", {"sessionId": sid, "text": "echo bg", "run_in_background": True}),
            4: ("terminal_list", {}),
            5: ("terminal_close", {"sessionId": sid}),
        }
        if turn == 4:
            await wakes.wait_for(seen[-1]["jobId"])  # the job ended; the model is told next
        if turn in steps:
            return ModelResponse(parts=[ToolCallPart(*steps[turn])])
        return ModelResponse(parts=[TextPart("done")])

    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note:
            client = stdio_client(tmp_path, log_handler=wakes)
            agent = Agent(FunctionModel(script), toolsets=[toolset_for(client)])
            async with agent:
                result = await agent.run("say hi in a terminal")
                note()
    assert result.output == "done"
    opened, echoed, read, background, listed, closed = seen
    assert echoed["viewport"] == "hi\n" and echoed["exitCode"] == 0
    assert "echo hi" in read["text"]
    assert background["kind"] == "background"
    [notice] = listed["notices"]
    assert notice["kind"] == "job_finished" and notice["jobId"] == background["jobId"]
    assert f"background job {background['jobId']}" in notice["text"]
    assert "notices" not in closed and closed["closed"] is True
    assert [s["sessionId"] for s in listed["sessions"]] == [opened["sessionId"]]


async def test_schemas_as_pydantic_ai_converts_them_for_openai_strict_mode(
    tmp_path: Path,
) -> None:
    """pydantic-ai's OpenAI strict transform of every schema, and a strict call accepted.

    Strict mode makes every property required and keeps its type: with the optional
    arguments nullable, a strict model's call (unused arguments null) is one the server
    takes. Without it, strict ``terminal_send`` would demand text, keys and a secret.
    """
    with anyio.fail_after(TEST_BOUND_S):
        async with cleanup_proven() as note, stdio_client(tmp_path) as client:
            tools = {tool.name: tool for tool in await client.list_tools()}
            strict = {
                name: OpenAIJsonSchemaTransformer(dict(tool.input_schema), strict=True).walk()
                for name, tool in tools.items()
            }
            send = strict["terminal_send"]
            assert set(send["required"]) == set(send["properties"])
            sid = (await ok(client, "terminal_open", {})).value["sessionId"]
            note()
            call: dict[str, Any] = {name: None for name in send["properties"]}
            call.update(sessionId=sid, text="echo via-strict")
            jsonschema.validate(call, send)
            assert (await ok(client, "terminal_send", call)).data.viewport == "via-strict\n"
            read: dict[str, Any] = {name: None for name in strict["terminal_read"]["properties"]}
            read.update(sessionId=sid, count=1)
            jsonschema.validate(read, strict["terminal_read"])
            assert (await ok(client, "terminal_read", read)).data.lineBegin == 1
            await ok(client, "terminal_close", {"sessionId": sid})
