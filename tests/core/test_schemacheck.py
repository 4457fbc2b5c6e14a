"""The compiled argument check never accepts what the full JSON Schema validator rejects."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.schemacheck import compile_check
from tests.helpers import full_access

_SAMPLES: list[object] = [
    None, True, False, 0, 1, -1, 2, 64, 65, 600000, 600001, 1.0, 1.5, -0.5, 1e300,
    float("nan"), "", "x", "SIGINT", "SIGKILL", "shell", "a" * 65, "a" * 4097, "é" * 64,
    [], ["x"], [1], ["enter", "x"], {}, {"a": 1}, {"name": "x"}, {"name": "x", "ask": "y"},
]  # fmt: skip


def _instances(schema: dict[str, Any], rng: random.Random, count: int) -> list[dict[str, Any]]:
    """Argument objects near the schema: valid ones, and ones one mutation away."""
    properties: dict[str, Any] = schema.get("properties", {})
    names = [*properties, "unknown"]
    out: list[dict[str, Any]] = []
    for _ in range(count):
        args: dict[str, Any] = {}
        for name in names:
            if rng.random() < 0.6:
                args[name] = rng.choice(_SAMPLES)
        out.append(args)
    return out


async def test_every_registered_tool_schema_compiles_and_never_accepts_more() -> None:
    rng = random.Random(1919)
    async with Harness(config=full_access()) as h:
        # The schemas as their authors wrote them, which the registry compiles (clients
        # are offered the published form, whose nulls the registry drops first).
        schemas = [
            {"name": name, "parameters": h.ctx.tools.get(name).parameters}
            for name in h.ctx.tools.names()
        ]
    assert len(schemas) >= 10
    accepted = 0
    for tool in schemas:
        parameters = tool["parameters"]
        check = compile_check(parameters)
        assert check is not None, f"{tool['name']}: schema outside the compiled subset"
        validator = jsonschema.Draft202012Validator(parameters)
        for args in _instances(parameters, rng, 400):
            if check(args):
                accepted += 1
                assert validator.is_valid(args), (tool["name"], args)
    assert accepted > 100  # the fast path is really taken for valid calls


_LEAVES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "d"},
        "s": {"type": "string", "minLength": 1, "maxLength": 3},
        "b": {"type": "boolean"},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "integer"}, True),
        ({"type": "number"}, False),
        ({"type": "integer", "minimum": 1}, 0),
        ({"type": "string", "maxLength": 2}, "abc"),
        ({"type": "string", "enum": ["a"]}, "b"),
        ({"type": "object", "required": ["a"]}, {}),
        ({"type": "object", "properties": {}, "additionalProperties": False}, {"a": 1}),
        ({"type": "array", "items": {"type": "string"}}, ["a", 1]),
        ({"type": "array", "minItems": 1}, []),
        ({"type": "object", "minProperties": 1}, {}),
        ({"type": "object", "maxProperties": 1}, {"a": 1, "b": 2}),
        ({"type": "array", "maxItems": 1}, ["a", "b"]),
        ({"type": ["string", "null"]}, 1),
        ({"type": "object", "additionalProperties": {"type": "string"}}, {"a": 1}),
        # Length and property-count limits in the general form (several types, or none).
        ({"type": ["string", "null"], "minLength": 2}, "é"),
        ({"maxLength": 1}, "ab"),
        ({"type": ["object", "null"], "minProperties": 1}, {}),
        ({"maxProperties": 1}, {"a": 1, "b": 2}),
        # Scalar properties of an object.
        (_LEAVES, {"n": True}),
        (_LEAVES, {"n": 0}),
        (_LEAVES, {"n": 11}),
        (_LEAVES, {"n": "5"}),
        (_LEAVES, {"s": 5}),
        (_LEAVES, {"s": ""}),
        (_LEAVES, {"s": "abcd"}),
        (_LEAVES, {"b": 1}),
        (_LEAVES, {"b": None}),
        (_LEAVES, {"s": "ab", "x": 1}),
    ],
)
def test_rejects_what_the_schema_rejects(schema: dict[str, Any], value: object) -> None:
    check = compile_check(schema)
    assert check is not None
    assert not check(value)
    assert not jsonschema.Draft202012Validator(schema).is_valid(value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^a"},
        {"oneOf": [{"type": "string"}]},
        {"type": "integer", "enum": [1, 2]},
        {"type": "object", "additionalProperties": {"type": "string", "format": "email"}},
        {"type": "object", "properties": {"a": {"$ref": "#/x"}}},
    ],
)
def test_keywords_outside_the_subset_leave_it_to_the_full_validator(
    schema: dict[str, Any],
) -> None:
    assert compile_check(schema) is None


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        ({"type": "string", "minLength": 1, "maxLength": 3}, "abc"),
        ({"type": "string", "minLength": 1, "maxLength": 3}, "é"),
        ({"type": "string", "minimum": 5}, "x"),  # number keywords pass a string
        ({"type": "integer", "minimum": 1, "maximum": 3}, 3),
        ({"type": "integer", "minimum": 0.5}, 10**400),
        ({"type": "integer", "maxLength": 1}, 12345),  # string keywords pass an integer
        ({"type": "boolean"}, False),
        ({"type": "object", "minProperties": 1, "maxProperties": 1}, {"a": 1}),
        ({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}, {"a": ""}),
        ({"type": "object", "additionalProperties": {"type": "integer"}}, {"a": 1, "b": 2}),
        ({"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2}, ["a"]),
        ({"type": "array"}, [1, "a", None]),
        ({"type": ["string", "null"], "maxLength": 1}, None),
        ({"enum": ["a", None]}, None),
        ({"minLength": 2}, 7),
        ({"type": ["string", "null"], "minLength": 2}, "éé"),
        ({"type": ["object", "null"], "minProperties": 1, "maxProperties": 1}, {"a": 1}),
        ({"maxProperties": 1}, "abc"),  # object keywords pass a string
        (_LEAVES, {"n": 1, "s": "é", "b": False}),
        (_LEAVES, {"n": 10, "s": "abc", "b": True}),
        (_LEAVES, {}),
    ],
)
def test_accepts_what_the_schema_accepts(schema: dict[str, Any], value: object) -> None:
    """The fast path is taken for valid values, at their limits and across types."""
    check = compile_check(schema)
    assert check is not None
    assert jsonschema.Draft202012Validator(schema).is_valid(value)
    assert check(value)


def test_every_tool_accepts_its_plain_well_typed_calls() -> None:
    """A send of text, of keys, with every option: each passes the compiled check."""
    from dsh_tool_terminal import ToolTerminalConfig, terminal_tools

    tools = {t.name: t for t in terminal_tools(lambda: None, lambda: None, ToolTerminalConfig())}  # type: ignore[arg-type,return-value]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("terminal_send", {"sessionId": "pty-1", "text": "echo hi"}),
        ("terminal_send", {"sessionId": "pty-1", "text": "", "submit": False, "timeoutMs": 5}),
        ("terminal_send", {"sessionId": "pty-1", "keys": ["C-c", "Enter"]}),
        ("terminal_send", {"sessionId": "pty-1", "text": "x", "run_in_background": True}),
        ("terminal_send", {"sessionId": "pty-1", "secret": {"name": "db"}}),
        ("terminal_open", {"type": "shell", "rows": 24, "cols": 80, "screen": True}),
        ("terminal_read", {"sessionId": "pty-1", "offset": 1, "count": 10}),
        ("terminal_signal", {"sessionId": "pty-1", "signal": "SIGINT"}),
        ("terminal_resize", {"sessionId": "pty-1", "rows": 30, "cols": 100}),
        ("terminal_list", {}),
    ]
    for name, args in calls:
        parameters = tools[name].parameters
        check = compile_check(parameters)
        assert check is not None, name
        assert jsonschema.Draft202012Validator(parameters).is_valid(args), (name, args)
        assert check(args), (name, args)
