"""A tool schema compiled once into a plain predicate, for the common case of valid arguments.

A general JSON Schema validator walks the schema on every call (~100 µs for a tool's
arguments), which is most of what checking costs on every send. Tool schemas use a small
subset of the vocabulary, so :func:`compile_check` turns that subset into nested closures
once, at registration. The predicate is only ever trusted when it says *valid*: it is
written to accept strictly less than the schema does, and anything it rejects (or any
schema using a keyword outside the subset, which compiles to ``None``) goes to the full
validator, which stays the authority for the verdict and the error message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Check", "compile_check"]

Check = Callable[[object], bool]

# Keywords that only annotate; they never change whether an instance is valid.
_ANNOTATIONS = frozenset(
    {"$schema", "$comment", "title", "description", "default", "examples", "deprecated"}
)
_SUPPORTED = _ANNOTATIONS | {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "items",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
}


def compile_check(schema: object) -> Check | None:
    """A predicate that is True only for instances ``schema`` accepts; None if unsupported."""
    if schema is True:
        return lambda _value: True
    if not isinstance(schema, Mapping) or not set(schema) <= _SUPPORTED:
        return None
    checks: list[Check] = []
    kind = schema.get("type")
    if kind is not None:
        type_check = _type_check(kind)
        if type_check is None:
            return None
        checks.append(type_check)
    for compiler in (_enum, _bounds, _lengths, _object, _counts, _items):
        part = compiler(schema)
        if isinstance(part, bool):
            return None  # the keyword's value is outside the subset
        if part is not None:
            checks.append(part)
    if not checks:
        return lambda _value: True
    if len(checks) == 1:
        return checks[0]
    parts = tuple(checks)
    return lambda value: all(check(value) for check in parts)


def _never(_value: object) -> bool:
    return False


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: _is_number(v) and not (isinstance(v, float) and not math.isfinite(v)),
    # An integral float (1.0) is an integer to JSON Schema, but not to a tool body that
    # indexes with it: only a true int passes here; the full validator decides the rest.
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
}


def _type_check(kind: object) -> Check | None:
    if isinstance(kind, str):
        return _TYPES.get(kind)
    if isinstance(kind, list) and kind and all(isinstance(k, str) and k in _TYPES for k in kind):
        options = tuple(_TYPES[k] for k in kind)
        return lambda value: any(check(value) for check in options)
    return None


def _enum(schema: Mapping[str, Any]) -> Check | bool | None:
    if "enum" not in schema:
        return None
    options = schema["enum"]
    if not isinstance(options, list) or not all(isinstance(o, str) or o is None for o in options):
        return False  # numbers and containers compare by JSON rules: leave them to jsonschema
    allowed = frozenset(options)
    return lambda value: (value is None or isinstance(value, str)) and value in allowed


def _bounds(schema: Mapping[str, Any]) -> Check | bool | None:
    low = schema.get("minimum")
    high = schema.get("maximum")
    if low is None and high is None:
        return None
    if not all(b is None or _is_number(b) for b in (low, high)):
        return False

    def check(value: object) -> bool:
        if not _is_number(value):
            return True  # bounds apply to numbers only
        assert isinstance(value, (int, float))
        return (low is None or value >= low) and (high is None or value <= high)

    return check


def _lengths(schema: Mapping[str, Any]) -> Check | bool | None:
    low = schema.get("minLength")
    high = schema.get("maxLength")
    if low is None and high is None:
        return None
    if not all(b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in (low, high)):
        return False
    # Python's len counts code points, as JSON Schema does.
    return lambda value: (
        not isinstance(value, str)
        or ((low is None or len(value) >= low) and (high is None or len(value) <= high))
    )


def _object(schema: Mapping[str, Any]) -> Check | bool | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not properties and not required and extra is True:
        return None
    if not isinstance(properties, Mapping) or not isinstance(required, list):
        return False
    if not all(isinstance(r, str) for r in required):
        return False
    compiled: dict[str, Check] = {}
    for name, sub in properties.items():
        sub_check = compile_check(sub)
        if sub_check is None:
            return False
        compiled[name] = sub_check
    # An unlisted name is checked against additionalProperties (False rejects it).
    other = compile_check(extra) if extra is not False else _never
    if other is None:
        return False
    needed = tuple(required)

    def check(value: object) -> bool:
        if not isinstance(value, dict):
            return True  # object keywords apply to objects only
        for name in needed:
            if name not in value:
                return False
        return all(compiled.get(name, other)(item) for name, item in value.items())

    return check


def _counts(schema: Mapping[str, Any]) -> Check | bool | None:
    low = schema.get("minProperties")
    high = schema.get("maxProperties")
    if low is None and high is None:
        return None
    if not all(b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in (low, high)):
        return False
    return lambda value: (
        not isinstance(value, dict)
        or ((low is None or len(value) >= low) and (high is None or len(value) <= high))
    )


def _items(schema: Mapping[str, Any]) -> Check | bool | None:
    low = schema.get("minItems")
    high = schema.get("maxItems")
    if "items" not in schema and low is None and high is None:
        return None
    if not all(b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in (low, high)):
        return False
    item = compile_check(schema.get("items", True))
    if item is None:
        return False

    def check(value: object) -> bool:
        if not isinstance(value, list):
            return True  # array keywords apply to arrays only
        if (low is not None and len(value) < low) or (high is not None and len(value) > high):
            return False
        return all(item(v) for v in value)

    return check
