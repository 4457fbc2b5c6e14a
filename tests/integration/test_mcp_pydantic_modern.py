"""pydantic-ai's ``MCPToolset`` on the 2026-07-28 revision, over stdio and HTTP (SPEC §25).

pydantic-ai builds its own FastMCP ``Client`` from what it is given — a stdio transport
that starts the server, or the HTTP endpoint's URL with a bearer token — and that client
negotiates as it does by default (``mode="auto"``: ``server/discover``, then 2026-07-28,
the stateless revision). Each test checks that revision was the one negotiated. The
model is ``TestModel`` (every tool, with schema-generated arguments) or a scripted
``FunctionModel`` that sees exactly what pydantic-ai hands a model: for our results,
the structured value alone.

What pydantic-ai offers and does not, on this revision:

- a per-call timeout: the toolset's ``read_timeout`` (FastMCP's per-request timeout);
  ``Agent(tool_timeout=...)`` and ``ToolDefinition.timeout`` are enforced for function
  tools only, never for MCP tools. The timed-out call reaches the model as a retry.
- the person's answer: the toolset's ``elicitation_handler`` is handed to FastMCP, whose
  client answers an ``input_required`` result through it and retries the call. pydantic-ai
  2.68 warns on entering a 2026-07-28 session that the handler "will never be called"
  (true of server-initiated requests, which this revision has none of); it is called.

Waits are bounded and woken by what they wait for; every process seen while the client
was connected is gone once it has disconnected (``cleanup_proven``).
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("fastmcp")
pytest.importorskip("pydantic_ai")

from mcp.client.subscriptions import listen
from pydantic_ai import Agent
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

from ..secrets.support import digest
from ..secrets.test_secret_mcp import SECRET
from ..secrets.test_secret_modern import PROMPT, Person
from .mcp_clients import MODERN, fastmcp_elicitation, fastmcp_transport
from .test_mcp_frameworks import NOT_CALLED, Wakes, cleanup_proven, parts
from .test_mcp_http import TOKEN_A, HttpServer, http_server
from .test_mcp_modern import NEXT_SEND_BOUND_S

TEST_BOUND_S = 120
# The toolset's per-request timeout in the cancellation test: well above any tool's own
# round trip here, well below the 5 s the timed-out command would take.
CALL_TIMEOUT_S = 1.0
TRANSPORTS = ["stdio", "http"]
# What pydantic-ai 2.68 (not 2.78) says on entering a 2026-07-28 session with an
# elicitation handler.
NEVER_CALLED_WARNING = r"`elicitation_handler` will never be called"


@contextlib.asynccontextmanager
async def pydantic_toolset(
    transport: str, workspace: Path, **options: Any
) -> AsyncIterator[tuple[MCPToolset[None], HttpServer | None]]:
    """An ``MCPToolset`` (not entered) built as pydantic-ai users build one, and the HTTP
    server it talks to when there is one."""
    async with contextlib.AsyncExitStack() as stack:
        server = None
        if transport == "http":
            server = await stack.enter_async_context(http_server(workspace))
            headers = {"Authorization": f"Bearer {TOKEN_A}"}
            toolset = MCPToolset[None](server.url, headers=headers, **options)
        else:
            toolset = MCPToolset[None](fastmcp_transport("stdio", workspace), **options)
        yield toolset, server


def assert_modern(toolset: MCPToolset[None]) -> None:
    """The revision pydantic-ai's client negotiated: 2026-07-28, with no handshake."""
    assert toolset.is_running
    assert toolset.client.protocol_version == MODERN
    assert toolset.client.initialize_result is None


Returned = ToolReturnPart | RetryPromptPart
Step = Callable[["Script"], tuple[str, dict[str, Any]] | Awaitable[tuple[str, dict[str, Any]]]]


class Script:
    """A ``FunctionModel``'s turns: each step names the next call from what came back.

    ``returned`` holds what the model was handed for each call (a tool return, or the
    retry prompt a failed or timed-out call became); ``started`` the time each turn began.
    """

    def __init__(self, *steps: Step) -> None:
        self.steps = steps
        self.returned: list[Returned] = []
        self.started: list[float] = []

    def retried(self, index: int) -> str:
        """What the model was told of call ``index``, which became a retry."""
        part = self.returned[index]
        # pydantic-ai 2.68 hands a retried call back as a tool return marked "retried".
        if isinstance(part, ToolReturnPart):
            assert part.outcome == "retried", part
            return str(part.content)
        return str(part.content)

    def value(self, index: int) -> dict[str, Any]:
        """The structured value call ``index`` returned (what the model saw)."""
        part = self.returned[index]
        assert isinstance(part, ToolReturnPart) and part.outcome == "success", part
        assert isinstance(part.content, dict), part.content
        return part.content

    @property
    def sid(self) -> str:
        return str(self.value(0)["sessionId"])

    async def __call__(self, messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
        self.started.append(time.monotonic())
        turn = len(self.started) - 1
        if turn:
            request = messages[-1]
            assert isinstance(request, ModelRequest)
            [part] = [p for p in request.parts if isinstance(p, ToolReturnPart | RetryPromptPart)]
            self.returned.append(part)
        if turn < len(self.steps):
            step = self.steps[turn](self)
            name, args = await step if inspect.isawaitable(step) else step
            return ModelResponse(parts=[ToolCallPart(name, args)])
        return ModelResponse(parts=[TextPart("done")])


def opening(_script: Script) -> tuple[str, dict[str, Any]]:
    return ("terminal_open", {})


def sending(text: str, **extra: Any) -> Step:
    return lambda script: ("terminal_send", {"sessionId": script.sid, "text": text, **extra})


def closing(script: Script) -> tuple[str, dict[str, Any]]:
    return ("terminal_close", {"sessionId": script.sid})


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_test_model_calls_every_tool_with_no_retry_from_our_schemas(
    transport: str, tmp_path: Path
) -> None:
    """Every tool but ``ssh_*``, with the arguments TestModel generates from its schema.

    Its generated ids (``sessionId: "a"``) name nothing, so those calls fail and
    ``tool_error_behavior="failed"`` shows the model the failure without a retry. What
    must never come back is a retry, or a refusal of arguments the schema produced.
    """
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            cleanup_proven() as note,
            pydantic_toolset(transport, tmp_path, tool_error_behavior="failed") as (toolset, _),
        ):
            called_for = toolset.filtered(lambda _ctx, tool: not tool.name.startswith(NOT_CALLED))
            agent = Agent(TestModel(call_tools="all"), toolsets=[called_for])
            async with agent:
                assert_modern(toolset)
                listed = await toolset.list_tools()
                result = await agent.run("use every tool")
                note()
    every = parts(result.all_messages())
    called = {p.tool_name for p in every if isinstance(p, ToolCallPart)}
    expected = {t.name for t in listed if not t.name.startswith(NOT_CALLED)}
    assert called == expected
    assert len(expected) >= 14
    assert [p for p in every if isinstance(p, RetryPromptPart)] == []
    returns = [p for p in every if isinstance(p, ToolReturnPart)]
    assert len(returns) == len(expected)
    schema_errors = [
        (p.tool_name, p.content)
        for p in returns
        if "INVALID_ARGUMENT" in str(p.content) or p.outcome == "retried"
    ]
    assert schema_errors == []
    outcome = {p.tool_name: p.outcome for p in returns}
    assert outcome["terminal_open"] == outcome["terminal_list"] == outcome["pty_open"] == "success"
    # What the model got for a successful call is the structured value.
    [listed_return] = [p for p in returns if p.tool_name == "terminal_list"]
    assert isinstance(listed_return.content, dict) and "sessions" in listed_return.content


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_function_model_flow_sees_the_background_notice(
    transport: str, tmp_path: Path
) -> None:
    """open, ``echo hi``, a background job, a later call carrying its notice, read, close."""
    wakes = Wakes()

    async def after_the_job_ended(script: Script) -> tuple[str, dict[str, Any]]:
        await wakes.wait_for(script.value(2)["jobId"])  # bounded; woken by job_done
        return ("terminal_list", {})

    script = Script(
        opening,
        sending("echo hi"),
        sending("sleep 0.3; echo DONE", run_in_background=True),
        after_the_job_ended,
        lambda s: ("job_output", {"jobId": s.value(2)["jobId"], "wait": True}),
        lambda s: ("terminal_read", {"sessionId": s.sid}),
        closing,
    )
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            cleanup_proven() as note,
            pydantic_toolset(transport, tmp_path, log_handler=wakes) as (toolset, _),
        ):
            agent = Agent(FunctionModel(script), toolsets=[toolset])
            async with agent:
                assert_modern(toolset)
                # 2026-07-28 has no standing stream: the wake-ups come on a listen stream.
                async with listen(toolset.client.session, tools_list_changed=True) as stream:
                    assert stream.honored.tools_list_changed is True
                    result = await agent.run("say hi in a terminal, and wait for a job")
                    note()
    assert result.output == "done"
    assert len(script.returned) == 7
    opened, echoed, background, listed, output, read, closed = (script.value(i) for i in range(7))
    assert (echoed["viewport"], echoed["waitReason"], echoed["exitCode"]) == (
        "hi\n",
        "stdin_read",
        0,
    )
    job = background["jobId"]
    assert background["kind"] == "background"
    assert "notices" not in background and "notices" not in echoed
    # The later call's tool return carries the job's end in its structured notices
    # (pydantic-ai hands the model nothing else, so a text-only notice would be lost).
    [notice] = listed["notices"]
    assert notice["kind"] == "job_finished"
    assert (notice["jobId"], notice["sessionId"], notice["status"]) == (
        job,
        opened["sessionId"],
        "completed",
    )
    assert f"background job {job}" in notice["text"]
    assert [s["sessionId"] for s in listed["sessions"]] == [opened["sessionId"]]
    assert wakes.jobs == [job]
    assert output["status"] == "completed" and "DONE" in output["output"]
    assert "notices" not in output  # told once, in the list
    assert "echo hi" in read["text"] and "hi" in read["text"].splitlines()
    assert closed["closed"] is True and "notices" not in closed


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_toolsets_timeout_is_a_ctrl_c_and_the_next_send_is_accepted_at_once(
    transport: str, tmp_path: Path
) -> None:
    """``read_timeout`` gives up on ``sleep 5; echo SLEPT``; the server interrupts it."""
    script = Script(
        opening,
        sending("echo started; sleep 5; echo SLEPT"),
        sending("echo back"),
        lambda s: ("terminal_read", {"sessionId": s.sid, "offset": 1, "count": 500}),
        closing,
    )
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            cleanup_proven() as note,
            pydantic_toolset(transport, tmp_path, read_timeout=CALL_TIMEOUT_S) as (toolset, _),
        ):
            agent = Agent(FunctionModel(script), toolsets=[toolset])
            async with agent:
                assert_modern(toolset)
                result = await agent.run("run a slow command, then another")
                note()
    assert result.output == "done"
    # The timed-out call reached the model as a retry (FastMCP's REQUEST_TIMEOUT).
    assert script.returned[1].tool_name == "terminal_send"
    assert script.retried(1) == "Request 'tools/call' timed out"
    given_up = script.started[2] - script.started[1]
    assert CALL_TIMEOUT_S <= given_up < CALL_TIMEOUT_S + 2, given_up
    # The next send was accepted on the first try, at once (no SEND_ACTIVE), and ran at
    # the shell's prompt: the sleep was interrupted.
    back = script.value(2)
    assert (back["viewport"], back["waitReason"], back["exitCode"]) == ("back\n", "stdin_read", 0)
    took = script.started[3] - script.started[2]
    assert took < NEXT_SEND_BOUND_S, f"the next send took {took * 1000:.0f} ms"
    printed = [row for row in script.value(3)["text"].splitlines() if "SLEPT" in row]
    assert printed and all("echo SLEPT" in row for row in printed), printed


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_secret_ask_goes_through_the_toolsets_elicitation_handler(
    transport: str, tmp_path: Path
) -> None:
    """At a hidden prompt: declined once (the model is told), then the page is submitted.

    The handler is the person of the secrets tests: on accept it fetches the page and
    submits the secret over HTTP; the secret reaches the terminal, never the client.
    """
    person = Person("decline", "accept")
    ask = {"ask": "unlock the vault"}
    script = Script(
        opening,
        sending(PROMPT),
        lambda s: ("terminal_send", {"sessionId": s.sid, "secret": ask}),
        lambda s: ("terminal_send", {"sessionId": s.sid, "secret": ask}),
        sending('printf %s "$pw" | sha256sum'),
        closing,
    )
    options = {"elicitation_handler": fastmcp_elicitation(person)}
    with anyio.fail_after(TEST_BOUND_S):
        async with (
            cleanup_proven() as note,
            pydantic_toolset(transport, tmp_path, **options) as (toolset, server),
        ):
            agent = Agent(FunctionModel(script), toolsets=[toolset])
            async with contextlib.AsyncExitStack() as entered:
                with warnings.catch_warnings():
                    # pydantic-ai 2.68 warns here that the handler will never be called,
                    # yet the handler answers the asks below; 2.78 no longer warns.
                    warnings.filterwarnings("ignore", NEVER_CALLED_WARNING, UserWarning)
                    await entered.enter_async_context(agent)
                assert_modern(toolset)
                result = await agent.run("type the vault password")
                note()
        log = server.log if server is not None else (tmp_path / "server.log").read_text()
    assert result.output == "done"
    assert script.value(1)["inputHidden"] is True
    declined = script.retried(2)
    assert declined.startswith("error [SECRET_DECLINED]"), declined
    assert "the person declined the request" in declined
    typed = script.value(3)
    assert typed["waitReason"] == "stdin_read", typed
    assert digest(SECRET) in script.value(4)["viewport"]
    assert script.value(5)["closed"] is True
    # The handler was called for each ask, each with its own page.
    assert len(person.urls) == len(set(person.urls)) == 2
    assert all("Vault password:" in message for message in person.messages)
    assert SECRET not in repr(result.all_messages())
    assert SECRET not in log
