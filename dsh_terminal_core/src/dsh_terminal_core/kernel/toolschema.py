"""Tool argument schemas in the one form every client framework converts (SPEC §25.4).

A tool author writes the natural schema: a flat object, the arguments it needs in
``required``, the others left out. Clients do not all read that alike. OpenAI's strict
function calling — as pydantic-ai, LangChain (``convert_to_openai_tool(strict=True)``)
and the OpenAI Agents SDK produce it — makes *every* property required and keeps its
type, so a strict model must fill in every optional argument; and it rejects a root
``anyOf``/``oneOf``, which pydantic-ai's ``TestModel`` cannot generate from either. The
portable way to say "optional" is therefore a nullable type, with ``null`` meaning
"left out".

So the schema a client sees is :func:`published`: every optional property, at the top
and in nested objects, also accepts ``null`` (as pydantic writes ``Optional``: ``anyOf``
of the type and ``{"type": "null"}``, which each of those converters walks). The
registry accepts exactly that: :func:`null_dropper` removes those nulls before the
author's schema checks the arguments, so a tool body never sees them. A rule that JSON
Schema could only state with a root ``anyOf`` ("one of text, keys or secret") is stated
in the description and enforced by the tool.

:func:`portability_problems` checks a published schema against the subset the
frameworks share; the test suite runs it over every registered tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["NullDropper", "null_dropper", "portability_problems", "published"]

NullDropper = Callable[[dict[str, Any]], dict[str, Any]]

_NULL: dict[str, Any] = {"type": "null"}
# Annotations stay beside the ``anyOf``, where every converter looks for them.
_HOISTED = ("description", "title", "default", "examples", "deprecated")
# Keywords some converter rejects, or drops while changing what a schema accepts.
_UNPORTABLE = (
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "$ref",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "propertyNames",
)
_ROOT_ONLY_UNPORTABLE = ("anyOf", "enum", "const")


def published(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``parameters`` as clients see them: every optional property also takes null.

    Required properties and properties that already accept null are left as they are.
    Nested objects (``{"type": "object", "properties": ...}``) follow the same rule for
    their own properties. The result accepts exactly the arguments the registry does.
    """
    return _publish_object(parameters)


def _publish_object(schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    result = dict(schema)
    if not isinstance(properties, Mapping) or not properties:
        return result
    required = set(schema.get("required", ()))
    result["properties"] = {
        name: _nested(sub) if name in required else _nullable(_nested(sub))
        for name, sub in properties.items()
    }
    return result


def _nested(schema: object) -> object:
    if isinstance(schema, Mapping) and schema.get("type") == "object":
        return _publish_object(schema)
    return schema


def _nullable(schema: object) -> object:
    if not isinstance(schema, Mapping) or _accepts_null(schema):
        return schema
    core = {key: value for key, value in schema.items() if key not in _HOISTED}
    outer = {key: schema[key] for key in _HOISTED if key in schema}
    return {"anyOf": [core, dict(_NULL)], **outer}


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in (schema.get("enum") or ()):
        return True
    members = schema.get("anyOf")
    return isinstance(members, list) and any(
        isinstance(m, Mapping) and _accepts_null(m) for m in members
    )


# -- what the registry accepts ---------------------------------------------------------


def null_dropper(parameters: Mapping[str, Any]) -> NullDropper | None:
    """A function that removes the nulls :func:`published` allows; None when it allows none.

    The function returns its argument itself when there is nothing to remove (the usual
    call), and a new dict otherwise; it never changes what it was given. A null in a
    required property stays, for the schema to refuse.
    """
    properties = parameters.get("properties")
    if not isinstance(properties, Mapping) or not properties:
        return None
    required = frozenset(parameters.get("required", ()))
    optional = frozenset(name for name in properties if name not in required)
    nested: dict[str, NullDropper] = {}
    for name, sub in properties.items():
        if isinstance(sub, Mapping) and sub.get("type") == "object":
            inner = null_dropper(sub)
            if inner is not None:
                nested[name] = inner
    if not optional and not nested:
        return None

    def drop(args: dict[str, Any]) -> dict[str, Any]:
        kept: dict[str, Any] | None = None
        for name, value in args.items():
            if value is None and name in optional:
                if kept is None:
                    kept = dict(args)
                del kept[name]
            elif type(value) is dict and name in nested:
                inner = nested[name](value)
                if inner is not value:
                    if kept is None:
                        kept = dict(args)
                    kept[name] = inner
        return args if kept is None else kept

    return drop


# -- the portable subset ---------------------------------------------------------------


def portability_problems(schema: Mapping[str, Any]) -> list[str]:
    """What in a published argument schema some client framework cannot take as written.

    The subset: a root ``{"type": "object"}`` with ``properties`` and
    ``additionalProperties: false``, no root ``anyOf``/``enum``; nowhere a keyword from
    ``oneOf``/``allOf``/``not``/``if``/``$ref``/``patternProperties``...; every object
    closed (``additionalProperties: false``); every optional property nullable; arrays
    with typed items; ``type`` lists only of scalar types. An object whose values are
    free (a map, ``additionalProperties: {schema}``) is reported as such: strict mode
    closes it, so a strict model can only send it empty.
    """
    problems: list[str] = []
    if schema.get("type") != "object":
        problems.append(f"root: type must be 'object', not {schema.get('type')!r}")
    for key in _ROOT_ONLY_UNPORTABLE:
        if key in schema:
            problems.append(f"root: {key} (OpenAI strict mode and TestModel reject it)")
    if schema.get("additionalProperties") is not False:
        problems.append("root: additionalProperties must be false")
    _check(schema, "root", problems)
    return problems


def _check(schema: object, where: str, problems: list[str]) -> None:
    if not isinstance(schema, Mapping):
        problems.append(f"{where}: a boolean schema")
        return
    for key in _UNPORTABLE:
        if key in schema:
            problems.append(f"{where}: {key}")
    kind = schema.get("type")
    if isinstance(kind, list) and ({"object", "array"} & set(kind)):
        problems.append(f"{where}: a type list with object or array (write anyOf)")
    for index, member in enumerate(schema.get("anyOf") or ()):
        _check(member, f"{where}.anyOf[{index}]", problems)
    if kind == "object":
        _check_object(schema, where, problems)
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping) or not ({"type", "enum", "anyOf"} & set(items)):
            problems.append(f"{where}: an array without typed items")
        else:
            _check(items, f"{where}[]", problems)


def _check_object(schema: Mapping[str, Any], where: str, problems: list[str]) -> None:
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping) and not properties:
        problems.append(f"{where}: a map (additionalProperties {{schema}}); strict mode empties it")
        return
    if not isinstance(properties, Mapping):
        problems.append(f"{where}: an object without properties")
        return
    if extra is not False:
        problems.append(f"{where}: additionalProperties must be false")
    required = set(schema.get("required", ()))
    if set(properties) - required and ({"minProperties", "maxProperties"} & set(schema)):
        # A strict model sends every property, the unused ones as null: a count would
        # count those, and strict converters drop the keyword anyway.
        problems.append(f"{where}: minProperties/maxProperties beside optional properties")
    for name, sub in properties.items():
        path = f"{where}.{name}"
        if name not in required and not (isinstance(sub, Mapping) and _accepts_null(sub)):
            problems.append(f"{path}: optional but not nullable")
        _check(sub, path, problems)
