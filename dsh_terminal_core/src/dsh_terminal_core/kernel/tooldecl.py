"""One typed declaration per tool: the function's signature is its schemas.

A tool is an async function of its arguments and the call's :class:`~.tools.ToolExec`
that returns its value. Both are ``TypedDict`` classes, so the type checker sees every
argument and every field a tool body touches, and :func:`tool` reads the same two types
once, at declaration, to derive what clients are offered and what the registry checks:

- the input schema (``Tool.parameters``): an object of the arguments, the required ones
  in ``required``, no other key allowed;
- the output schema (``Tool.output_schema``, MCP's ``outputSchema``): an object of the
  value's fields, the required ones in ``required`` (none for a value that is a plain
  ``str``, its own text).

Bounds and descriptions ride on ``Annotated`` metadata — a plain string is the
description, :class:`Text`, :class:`Range` and :class:`Items` bound strings, numbers and
arrays, :class:`Raw` adds keywords as they are::

    class KillArgs(TypedDict):
        jobId: Annotated[str, Text(1, 64), "The job id, e.g. job-1."]

    class Killed(TypedDict):
        jobId: str
        killed: bool

    @tool("job_kill", description="Stop a background job.", finalize=bound)
    async def job_kill(args: KillArgs, exec_: ToolExec) -> Killed:
        ...

The decorated name is the :class:`~.tools.Tool` itself, ready for ``ctx.tools.register``.
The schemas are written in the author's form; the registry publishes them nullable
(:mod:`.toolschema`) and checks arguments with a predicate compiled once per schema
(:mod:`.schemacheck`), the full validator keeping the last word and the message.
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import (
    Any,
    Literal,
    NotRequired,
    Protocol,
    Required,
    Union,
    get_args,
    get_origin,
    overload,
)

import attrs

from .tools import Execute, Finalize, Render, Tool, ToolExec

__all__ = ["Items", "Range", "Raw", "Text", "derive_schema", "tool"]


@attrs.frozen
class Text:
    """Bounds of a string argument (``minLength``, ``maxLength``, ``pattern``)."""

    min_length: int | None = None
    max_length: int | None = None
    pattern: str | None = None

    def keywords(self) -> dict[str, Any]:
        return _present(minLength=self.min_length, maxLength=self.max_length, pattern=self.pattern)


@attrs.frozen
class Range:
    """Bounds of a number (``minimum``, ``maximum``)."""

    minimum: int | float | None = None
    maximum: int | float | None = None

    def keywords(self) -> dict[str, Any]:
        return _present(minimum=self.minimum, maximum=self.maximum)


@attrs.frozen
class Items:
    """Bounds of an array (``minItems``, ``maxItems``)."""

    min_items: int | None = None
    max_items: int | None = None

    def keywords(self) -> dict[str, Any]:
        return _present(minItems=self.min_items, maxItems=self.max_items)


@attrs.frozen
class Raw:
    """JSON Schema keywords added as they are, for what the other markers do not say."""

    schema: Mapping[str, Any]

    def keywords(self) -> dict[str, Any]:
        return dict(self.schema)


_Marker = Text | Range | Items | Raw
A = typing.TypeVar("A")
V = typing.TypeVar("V")


def _present(**keywords: Any) -> dict[str, Any]:
    return {key: value for key, value in keywords.items() if value is not None}


class _Declare(Protocol):
    """What ``tool(...)`` without ``render`` returns: it takes any typed tool function."""

    def __call__(self, execute: Callable[[A, ToolExec], Awaitable[V]], /) -> Tool: ...


@overload
def tool(
    name: str,
    *,
    description: str,
    render: None = None,
    finalize: Finalize | None = None,
) -> _Declare: ...


@overload
def tool(
    name: str,
    *,
    description: str,
    render: Callable[[A, V], str],
    finalize: Finalize | None = None,
) -> Callable[[Callable[[A, ToolExec], Awaitable[V]]], Tool]: ...


def tool(
    name: str,
    *,
    description: str,
    render: Callable[[A, V], str] | None = None,
    finalize: Finalize | None = None,
) -> Callable[[Callable[[A, ToolExec], Awaitable[V]]], Tool]:
    """Declare the decorated async function as the tool ``name``; see the module docstring.

    The function's first parameter is annotated with its arguments' ``TypedDict`` and its
    return with its value's; ``str`` (a value that is its own text) or ``None`` declares
    no output schema. A wrong annotation is a ``TypeError`` here, at import, not at the
    first call.
    """

    def declare(execute: Callable[[A, ToolExec], Awaitable[V]]) -> Tool:
        hints = typing.get_type_hints(execute, include_extras=True)
        first = next(iter(inspect.signature(execute).parameters), None)
        arguments = hints.get(first) if first is not None else None
        if arguments is None or not typing.is_typeddict(_unwrap(arguments)[0]):
            raise TypeError(f"tool {name!r}: annotate its first parameter with a TypedDict")
        returned = hints.get("return")
        output = None
        if returned is not None and returned not in (type(None), str):
            if not typing.is_typeddict(_unwrap(returned)[0]):
                raise TypeError(
                    f"tool {name!r}: its return annotation must be a TypedDict, str or None"
                )
            output = derive_schema(returned, closed=False)
        # The registry hands every body a checked dict; the TypedDict is its static shape.
        run = typing.cast(Execute, execute)
        shown = typing.cast(Render | None, render)
        return Tool(
            name=name,
            description=description,
            parameters=derive_schema(arguments, closed=True),
            execute=run,
            render=shown,
            finalize=finalize,
            output_schema=output,
        )

    return declare


def derive_schema(annotation: Any, *, closed: bool) -> dict[str, Any]:
    """The JSON schema of a type as tools use them; ``closed`` objects refuse other keys."""
    base, markers, description = _unwrap(annotation)
    schema = _base_schema(base, closed)
    for marker in markers:
        schema.update(marker.keywords())
    if description is not None:
        schema["description"] = description
    return schema


def _unwrap(annotation: Any) -> tuple[Any, list[_Marker], str | None]:
    """The type under ``Annotated``/``Required``/``NotRequired``, its markers, its text."""
    markers: list[_Marker] = []
    description: str | None = None
    while True:
        origin = get_origin(annotation)
        if origin is typing.Annotated:
            base, *extras = get_args(annotation)
            for extra in extras:
                if isinstance(extra, str):
                    description = extra
                elif isinstance(extra, _Marker):
                    markers.append(extra)
                else:
                    raise TypeError(f"unknown schema marker {extra!r}")
            annotation = base
        elif origin in (Required, NotRequired):
            annotation = get_args(annotation)[0]
        else:
            return annotation, markers, description


_SIMPLE: dict[Any, str] = {
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}
_ARRAYS = (list, tuple, collections.abc.Sequence)
_MAPS = (dict, collections.abc.Mapping)


def _base_schema(base: Any, closed: bool) -> dict[str, Any]:
    if base is Any:
        return {}
    if base in _SIMPLE:
        return {"type": _SIMPLE[base]}
    if typing.is_typeddict(base):
        return _object_schema(base, closed)
    origin = get_origin(base)
    args = get_args(base)
    if origin is Literal:
        kinds = {_SIMPLE.get(type(value)) for value in args}
        schema: dict[str, Any] = {"enum": list(args)}
        if len(kinds) == 1 and None not in kinds:
            schema = {"type": kinds.pop(), **schema}
        return schema
    if origin in (Union, types.UnionType):
        members = [derive_schema(arg, closed=closed) for arg in args]
        if all(set(member) == {"type"} for member in members):
            return {"type": [member["type"] for member in members]}
        return {"anyOf": members}
    if origin in _ARRAYS:
        item = args[0] if args else Any
        return {"type": "array", "items": derive_schema(item, closed=closed)}
    if origin in _MAPS:
        value = args[1] if len(args) == 2 else Any
        schema = {"type": "object"}
        if value is not Any:
            schema["additionalProperties"] = derive_schema(value, closed=closed)
        return schema
    raise TypeError(f"no JSON schema for {base!r} in a tool declaration")


def _is_required(hint: Any, total: bool) -> bool:
    """Whether a ``TypedDict`` key is required, read from the resolved hint itself.

    Python 3.11 computes ``__required_keys__`` before string annotations are resolved,
    so under ``from __future__ import annotations`` it misses ``NotRequired``.
    """
    while get_origin(hint) is typing.Annotated:
        hint = get_args(hint)[0]
    origin = get_origin(hint)
    if origin is Required:
        return True
    if origin is NotRequired:
        return False
    return total


def _object_schema(typed: Any, closed: bool) -> dict[str, Any]:
    hints = typing.get_type_hints(typed, include_extras=True)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {key: derive_schema(hint, closed=closed) for key, hint in hints.items()},
    }
    required = [key for key, hint in hints.items() if _is_required(hint, typed.__total__)]
    if required:
        schema["required"] = required
    if closed:
        schema["additionalProperties"] = False
    return schema
