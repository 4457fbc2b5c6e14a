"""One typed declaration per tool: the schemas come from the signature, and are checked."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.tooldecl import Items, Range, Raw, Text, derive_schema, tool
from dsh_terminal_core.kernel.tools import ToolExec, ToolRegistry

ROOT = Path(__file__).resolve().parents[2]


class Secretly(TypedDict, total=False):
    name: Annotated[str, Text(1, 256)]
    ask: Annotated[str, Text(1, 1000)]


class SendArgs(TypedDict):
    sessionId: Annotated[str, Text(1, 64), "The session id."]
    text: NotRequired[Annotated[str, Text(max_length=10), "What to type."]]
    timeoutMs: NotRequired[Annotated[int, Range(minimum=1, maximum=600000)]]
    keys: NotRequired[Annotated[list[Annotated[str, Text(1, 8)]], Items(1, 4)]]
    secret: NotRequired[Annotated[Secretly, "A secret by name or by asking."]]
    env: NotRequired[dict[str, str]]
    mode: NotRequired[Literal["line", "screen"]]
    extra: NotRequired[Annotated[int, Raw({"multipleOf": 2})]]


class Sent(TypedDict):
    output: str
    exitCode: int | None
    waitReason: Literal["stdin_read", "timeout"]
    screen: NotRequired[Any]


@tool("demo_send", description="Type into a session.", render=lambda a, v: v["output"])
async def demo_send(args: SendArgs, exec_: ToolExec) -> Sent:
    return {"output": args.get("text", ""), "exitCode": 0, "waitReason": "stdin_read"}


def test_the_input_schema_is_the_arguments_typed_dict() -> None:
    params = demo_send.parameters
    assert params["type"] == "object"
    assert params["required"] == ["sessionId"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert list(props) == [
        "sessionId",
        "text",
        "timeoutMs",
        "keys",
        "secret",
        "env",
        "mode",
        "extra",
    ]
    assert props["sessionId"] == {
        "type": "string",
        "minLength": 1,
        "maxLength": 64,
        "description": "The session id.",
    }
    assert props["timeoutMs"] == {"type": "integer", "minimum": 1, "maximum": 600000}
    assert props["keys"] == {
        "type": "array",
        "items": {"type": "string", "minLength": 1, "maxLength": 8},
        "minItems": 1,
        "maxItems": 4,
    }
    # A nested object is closed too, and total=False leaves every key optional.
    assert props["secret"]["additionalProperties"] is False
    assert "required" not in props["secret"]
    assert props["env"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert props["mode"] == {"type": "string", "enum": ["line", "screen"]}
    assert props["extra"] == {"type": "integer", "multipleOf": 2}


def test_the_output_schema_is_the_return_typed_dict_and_stays_open() -> None:
    out = demo_send.output_schema
    assert out is not None
    assert out["required"] == ["output", "exitCode", "waitReason"]
    assert "additionalProperties" not in out
    assert out["properties"]["exitCode"] == {"type": ["integer", "null"]}
    assert out["properties"]["screen"] == {}


async def test_the_registry_checks_declared_arguments() -> None:
    registry = ToolRegistry()
    registry.register(demo_send)
    agent = Agent("decl")
    try:
        exec_ = ToolExec(agent=agent)
        ok = await registry.call("demo_send", {"sessionId": "s", "text": "hi"}, exec_)
        assert not ok.is_error and ok.text == "hi"
        for bad, said in (
            ({}, "missing required argument 'sessionId'"),
            ({"sessionId": "s", "colour": 1}, "unknown argument 'colour'"),
            ({"sessionId": "s", "text": "x" * 11}, "longer than 10"),
            ({"sessionId": "s", "mode": "tty"}, "must be one of"),
            ({"sessionId": "s", "secret": {"nme": "x"}}, "unknown argument 'nme'"),
            ({"sessionId": "s", "keys": []}, "keys"),
            ({"sessionId": "s", "extra": 3}, "extra"),
        ):
            result = await registry.call("demo_send", bad, exec_)
            assert result.is_error and "INVALID_ARGUMENT" in result.text, bad
            assert said in result.text, (bad, result.text)
        # Null means left out for an optional argument (the published, nullable form).
        nulls = await registry.call("demo_send", {"sessionId": "s", "text": None}, exec_)
        assert not nulls.is_error and nulls.text == ""
    finally:
        await agent.dispose()


class EchoArgs(TypedDict):
    text: str


@tool("demo_echo", description="Say it back.")
async def demo_echo(args: EchoArgs, exec_: ToolExec) -> str:
    return args["text"]


async def test_a_text_value_declares_no_output_schema() -> None:
    assert demo_echo.output_schema is None
    assert demo_echo.parameters["required"] == ["text"]
    registry = ToolRegistry()
    registry.register(demo_echo)
    agent = Agent("decl-text")
    try:
        result = await registry.call("demo_echo", {"text": "hi"}, ToolExec(agent=agent))
        assert (result.text, result.value, result.is_error) == ("hi", "hi", False)
    finally:
        await agent.dispose()


def test_a_declaration_that_is_not_typed_fails_at_import() -> None:
    with pytest.raises(TypeError, match="TypedDict"):

        @tool("untyped", description="d")
        async def untyped(args: dict[str, Any], exec_: ToolExec) -> None: ...

    with pytest.raises(TypeError, match="TypedDict, str or None"):

        @tool("counted", description="d")
        async def counted(args: EchoArgs, exec_: ToolExec) -> int: ...

    with pytest.raises(TypeError, match="no JSON schema"):
        derive_schema(set[int], closed=True)


def test_every_plugin_declares_its_tools_this_way() -> None:
    # The Tool class itself is built only by the declaration; a plugin that writes
    # Tool(...) by hand brings back the five copies of one shape this replaced.
    hand_built = []
    for src in ROOT.glob("**/src/**/*.py"):
        if ".venv" in src.parts or "build" in src.parts:
            continue
        if src.relative_to(ROOT).parts[0] == "tests":
            # test-only fixture plugins (the conformance suite's 2020-12 schema tool
            # needs a raw schema, which no declaration writes) are never shipped
            continue
        if src.name in ("tools.py", "tooldecl.py") and src.parent.name == "kernel":
            continue
        for number, line in enumerate(src.read_text().splitlines(), 1):
            if re.search(r"(?<![\w.])Tool\(", line):
                hand_built.append(f"{src.relative_to(ROOT)}:{number}")
    assert not hand_built, hand_built
