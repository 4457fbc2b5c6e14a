"""Published argument schemas: optional means nullable, and the registry accepts exactly that."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.tools import Tool, ToolExec, ToolRegistry
from dsh_terminal_core.kernel.toolschema import null_dropper, portability_problems, published
from tests.helpers import full_access

AUTHORED: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1, "description": "which"},
        "text": {"type": "string", "description": "what", "default": ""},
        "maybe": {"type": ["integer", "null"]},
        "spec": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "ask": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
    },
    "required": ["id"],
    "additionalProperties": False,
}


def test_optional_properties_become_nullable_and_required_ones_stay() -> None:
    shown = published(AUTHORED)
    properties = shown["properties"]
    assert properties["id"] == AUTHORED["properties"]["id"]
    assert properties["text"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "description": "what",
        "default": "",
    }
    assert properties["maybe"] == {"type": ["integer", "null"]}  # already nullable
    spec = properties["spec"]["anyOf"][0]
    assert spec["properties"]["name"] == {"type": "string"}  # required inside spec
    assert spec["properties"]["ask"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert AUTHORED["properties"]["text"] == {
        "type": "string",
        "description": "what",
        "default": "",
    }


@pytest.mark.parametrize(
    "args",
    [
        {"id": "x"},
        {"id": "x", "text": None, "spec": None},
        {"id": "x", "spec": {"name": "n", "ask": None}},
        {"id": "x", "text": "t", "maybe": None},
    ],
)
def test_what_the_published_schema_accepts_the_registry_accepts(args: dict[str, Any]) -> None:
    jsonschema.validate(args, published(AUTHORED))
    drop = null_dropper(AUTHORED)
    assert drop is not None
    stripped = drop(args)
    jsonschema.validate(stripped, AUTHORED)
    assert None not in stripped.values()


@pytest.mark.parametrize(
    "args",
    [
        {"id": None},
        {"id": "x", "spec": {"name": None}},
        {"id": "x", "text": 3},
        {"id": "x", "no": 1},
    ],
)
def test_what_the_published_schema_refuses_the_registry_refuses(args: dict[str, Any]) -> None:
    assert not jsonschema.Draft202012Validator(published(AUTHORED)).is_valid(args)
    drop = null_dropper(AUTHORED)
    assert drop is not None
    assert not jsonschema.Draft202012Validator(AUTHORED).is_valid(drop(args))


def test_dropping_nulls_copies_only_when_it_changes_something() -> None:
    drop = null_dropper(AUTHORED)
    assert drop is not None
    args = {"id": "x", "text": "t"}
    assert drop(args) is args
    given = {"id": "x", "text": None}
    assert drop(given) == {"id": "x"} and given == {"id": "x", "text": None}
    assert null_dropper({"type": "object", "properties": {"a": {}}, "required": ["a"]}) is None


async def test_a_tool_body_never_sees_the_nulls() -> None:
    seen: list[dict[str, Any]] = []

    async def execute(args: dict[str, Any], _exec: ToolExec) -> dict[str, Any]:
        seen.append(args)
        return {}

    registry = ToolRegistry()
    registry.register(Tool(name="probe", description="d", parameters=AUTHORED, execute=execute))
    result = await registry.call(
        "probe",
        {"id": "x", "text": None, "spec": {"name": "n", "ask": None}},
        ToolExec(agent=Agent("a")),
    )
    assert not result.is_error, result.text
    assert seen == [{"id": "x", "spec": {"name": "n"}}]
    refused = await registry.call("probe", {"id": None}, ToolExec(agent=Agent("a")))
    assert refused.text.startswith("error [INVALID_ARGUMENT]")


def test_the_portable_subset_names_what_a_framework_cannot_take() -> None:
    assert portability_problems(published(AUTHORED)) == []
    assert portability_problems(AUTHORED) == [
        "root.text: optional but not nullable",
        "root.spec: optional but not nullable",
        "root.spec.ask: optional but not nullable",
    ]
    rooted_union = {"type": "object", "anyOf": [{"required": ["a"]}], "properties": {}}
    assert "root: anyOf (OpenAI strict mode and TestModel reject it)" in portability_problems(
        rooted_union
    )
    counted = {
        "type": "object",
        "properties": {"s": {"type": "object", "properties": {"a": {"type": "string"}},
                             "minProperties": 1, "additionalProperties": False}},
        "required": ["s"],
        "additionalProperties": False,
    }  # fmt: skip
    assert portability_problems(published(counted)) == [
        "root.s: minProperties/maxProperties beside optional properties"
    ]


async def test_every_registered_tool_is_portable_but_the_env_map() -> None:
    """One known exception: ``pty_open``'s ``env`` is a map, which strict mode empties
    (pydantic-ai and LangChain close it; the OpenAI Agents SDK keeps that tool non-strict)."""
    async with Harness(config=full_access()) as h:
        problems = {
            s["name"]: portability_problems(s["parameters"])
            for s in h.tool_schemas()
            if portability_problems(s["parameters"])
        }
    assert problems == {
        "pty_open": [
            "root.env.anyOf[0]: a map (additionalProperties {schema}); strict mode empties it"
        ]
    }
