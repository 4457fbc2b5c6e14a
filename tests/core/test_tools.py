"""Tool registry: schema validation before execute, error rendering, final-text bound."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import NEVER_CANCELLED, Cancellation
from dsh_terminal_core.kernel.errors import DshError, TerminalError, ToolNotFound
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.tools import Tool, ToolCall, ToolExec, ToolRegistry

from ..helpers import full_access

SCHEMA = {
    "type": "object",
    "properties": {
        "sessionId": {"type": "string"},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "signal": {"type": "string", "enum": ["SIGINT", "SIGTERM"]},
    },
    "required": ["sessionId"],
    "additionalProperties": False,
}


@pytest.fixture
def registry() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    reg = ToolRegistry()

    async def execute(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        calls.append(args)
        if args["sessionId"] == "foreign":
            raise TerminalError("session pty-9 belongs to another agent", "FOREIGN_SESSION")
        if args["sessionId"] == "crash":
            raise KeyError("boom")
        return {"ok": True, "agent": exec_.agent.id}

    reg.register(
        Tool(
            name="probe",
            description="d",
            parameters=SCHEMA,
            execute=execute,
            render=lambda args, value: f"ok for {value['agent']}",
            finalize=lambda text: text[:120],
        )
    )
    return reg, calls


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "missing required argument 'sessionId'"),
        ({"sessionId": "x", "bogus": 1}, "unknown argument 'bogus'"),
        ({"sessionId": 5}, "argument 'sessionId' must be of type string, got integer"),
        (
            {"sessionId": "x", "count": True},
            "argument 'count' must be of type integer, got boolean",
        ),
        ({"sessionId": "x", "count": 0}, "argument 'count' must be >= 1, got 0"),
        ({"sessionId": "x", "count": 11}, "argument 'count' must be <= 10, got 11"),
        (
            {"sessionId": "x", "signal": "SIGKIL"},
            "argument 'signal' must be one of 'SIGINT', 'SIGTERM'",
        ),
        ([1, 2], "arguments must be a JSON object, got array"),
    ],
)
async def test_invalid_arguments_are_rejected_before_execute(
    registry: tuple[ToolRegistry, list[dict[str, Any]]], args: object, message: str
) -> None:
    reg, calls = registry
    result = await reg.call("probe", args, ToolExec(agent=Agent("a")))
    assert result.is_error
    assert result.text.startswith("error [INVALID_ARGUMENT]: ")
    assert message in result.text
    assert calls == []


async def test_success_renders_and_finalizes(
    registry: tuple[ToolRegistry, list[dict[str, Any]]],
) -> None:
    reg, _ = registry
    name = "agent-" + "x" * 200
    result = await reg.call("probe", {"sessionId": "x"}, ToolExec(agent=Agent(name)))
    assert not result.is_error
    assert result.value == {"ok": True, "agent": name}
    assert result.text == f"ok for {name}"[:120]  # bounded by the tool's finalize


async def test_errors_carry_stable_codes(
    registry: tuple[ToolRegistry, list[dict[str, Any]]],
) -> None:
    reg, _ = registry
    foreign = await reg.call("probe", {"sessionId": "foreign"}, ToolExec(agent=Agent("a")))
    assert foreign.is_error and foreign.text.startswith("error [FOREIGN_SESSION]: session pty-9")
    crash = await reg.call("probe", {"sessionId": "crash"}, ToolExec(agent=Agent("a")))
    assert crash.is_error and crash.text.startswith("error [INTERNAL]: KeyError")
    unknown = await reg.call("nope", {}, ToolExec(agent=Agent("a")))
    assert unknown.is_error and unknown.text == "error [UNKNOWN_TOOL]: no tool named 'nope'"


async def test_duplicate_tool_name_is_refused_and_unregister_works(
    registry: tuple[ToolRegistry, list[dict[str, Any]]],
) -> None:
    reg, _ = registry
    tool = reg.get("probe")
    with pytest.raises(Exception, match="already registered"):
        reg.register(tool)
    assert reg.schemas()[0]["name"] == "probe"


async def test_validate_names_an_unknown_tool(
    registry: tuple[ToolRegistry, list[dict[str, Any]]],
) -> None:
    reg, _ = registry
    assert reg.validate("probe", {"sessionId": "x"}) == {"sessionId": "x"}
    with pytest.raises(ToolNotFound, match="no tool named 'nope'"):
        reg.validate("nope", {})


async def test_harness_calls_go_to_an_override_of_the_tool_registry(
    registry: tuple[ToolRegistry, list[dict[str, Any]]],
) -> None:
    """The harness keeps its registry at hand, and still honours ``ctx.override``."""
    reg, calls = registry
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        with h.ctx.override("tools", reg):
            result = await h.call_tool(agent, "probe", {"sessionId": "x"})
            assert (result.is_error, result.text) == (False, "ok for a")
            missing = await h.call_tool(agent, "terminal_list", {})
            assert missing.text == "error [UNKNOWN_TOOL]: no tool named 'terminal_list'"
        assert calls == [{"sessionId": "x"}]
        listed = await h.call_tool(agent, "terminal_list", {})
        assert not listed.is_error and listed.value == {"sessions": []}
        assert (await h.call_tool(agent, "probe", {})).text.startswith("error [UNKNOWN_TOOL]")


async def test_observers_are_told_every_outcome_and_cannot_fail_a_call(
    registry: tuple[ToolRegistry, list[dict[str, Any]]],
) -> None:
    reg, _ = registry
    seen: list[ToolCall] = []

    def failing(_call: ToolCall) -> None:
        raise RuntimeError("an observer's own bug")

    stop_failing = reg.observe_calls(failing)
    stop = reg.observe_calls(seen.append)
    exec_ = ToolExec(agent=Agent("a"))
    ok = await reg.call("probe", {"sessionId": "x"}, exec_)
    bad = await reg.call("probe", {"sessionId": 5}, exec_)
    unknown = await reg.call("nope", {}, exec_)
    crash = await reg.call("probe", {"sessionId": "crash"}, exec_)
    foreign = await reg.call("probe", {"sessionId": "foreign"}, exec_)
    assert [c.code for c in seen] == [
        None,
        "INVALID_ARGUMENT",
        "UNKNOWN_TOOL",
        "INTERNAL",
        "FOREIGN_SESSION",
    ]
    assert [c.result for c in seen] == [ok, bad, unknown, crash, foreign]
    assert not ok.is_error and all(r.is_error for r in (bad, unknown, crash, foreign))
    assert all(c.exec_ is exec_ and c.duration_s >= 0 for c in seen)
    stop()
    stop_failing()
    await reg.call("probe", {"sessionId": "x"}, exec_)
    assert len(seen) == 5  # stopped observers hear nothing more


async def test_an_observer_hears_of_a_cancelled_call() -> None:
    reg = ToolRegistry()
    entered = asyncio.Event()

    async def hang(_args: dict[str, Any], _exec: ToolExec) -> None:
        entered.set()
        await asyncio.get_running_loop().create_future()

    reg.register(Tool(name="hang", description="d", parameters={"type": "object"}, execute=hang))
    seen: list[ToolCall] = []
    reg.observe_calls(seen.append)
    call = asyncio.ensure_future(reg.call("hang", {}, ToolExec(agent=Agent("a"))))
    await entered.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert [(c.name, c.code, c.result) for c in seen] == [("hang", "CANCELLED", None)]


async def test_a_call_without_a_token_gets_one_that_never_fires() -> None:
    """A call made without ``cancel`` shares a token nobody can cancel, which keeps
    nothing a send registers on it; a caller's own token reaches the tool as given."""
    reg = ToolRegistry()
    tokens: list[Cancellation] = []

    async def capture(_args: dict[str, Any], exec_: ToolExec) -> str:
        tokens.append(exec_.cancel)
        return "ok"

    reg.register(
        Tool(name="capture", description="d", parameters={"type": "object"}, execute=capture)
    )
    mine = Cancellation()
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        with h.ctx.override("tools", reg):
            await h.call_tool(agent, "capture", {})
            await h.call_tool(agent, "capture", {})
            await h.call_tool(agent, "capture", {}, cancel=mine)
    assert tokens[0] is tokens[1] is NEVER_CANCELLED and tokens[2] is mine
    fired: list[BaseException] = []
    remove = NEVER_CANCELLED.on_cancel(fired.append)
    remove()
    remove()
    with pytest.raises(DshError) as refused:
        NEVER_CANCELLED.cancel()
    assert refused.value.code == "UNSUPPORTED"
    assert not NEVER_CANCELLED.cancelled and NEVER_CANCELLED.reason is None and fired == []
    waiting = asyncio.ensure_future(NEVER_CANCELLED.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
