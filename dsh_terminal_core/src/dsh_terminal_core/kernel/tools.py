"""Tools: named, schema-checked async operations an agent can call.

Arguments are validated against the tool's JSON schema before ``execute`` runs, so a
tool body never sees an unknown key or a wrong type. Clients are offered the schema in
its portable form (:mod:`.toolschema`): an optional argument may also be ``null``, which
means the same as leaving it out, and is removed before the tool sees its arguments.
Every outcome becomes a :class:`ToolResult`; failures render as ``error [CODE]: message``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema

from .cancel import Cancellation
from .errors import DshError, ErrorCode, InvalidArgument, ToolNotFound
from .schemacheck import Check, compile_check
from .toolschema import NullDropper, null_dropper, published

if TYPE_CHECKING:
    from .agents import Agent
    from .humanask import HumanAsker
    from .secret import SecretAsker

__all__ = [
    "NOTICES_SCHEMA",
    "CallObserver",
    "Tool",
    "ToolCall",
    "ToolExec",
    "ToolRegistry",
    "ToolResult",
    "render_error",
]

log = logging.getLogger(__name__)

Execute = Callable[[dict[str, Any], "ToolExec"], Awaitable[Any]]
Render = Callable[[dict[str, Any], Any], str]
Finalize = Callable[[str], str]

#: The ``notices`` a result's value may carry: what happened for the agent since its
#: previous call (a background job ended, a waitFor matched), each as ``{kind, text}``
#: plus the notice's data. The MCP server adds them (the same notices it renders as
#: ``[notice]`` lines), because some clients hand their model only the structured value.
NOTICES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": (
        "What happened for you since your previous call (e.g. a background job ended), "
        "oldest first; the same as the [notice] lines of the text."
    ),
    "items": {
        "type": "object",
        "properties": {
            "kind": {"type": "string"},
            "text": {"type": "string"},
            "sessionId": {"type": ["string", "null"]},
            "jobId": {"type": "string"},
            "status": {"type": "string"},
            "lineNumber": {"type": "integer"},
        },
        "required": ["kind", "text"],
    },
}


@attrs.frozen(kw_only=True)
class ToolExec:
    """Who is calling, how to notice that the call was cancelled, how to ask its person.

    ``ask_secret`` and ``ask_human`` are set by a host that can reach the person at the
    client (the MCP server, through URL-mode elicitation); None elsewhere. ``identity`` is
    the authenticated identity the call arrived as (the MCP HTTP server's bearer-token
    identity); None in-process and over stdio.
    """

    agent: Agent = attrs.field(eq=False)
    cancel: Cancellation = attrs.field(factory=Cancellation, eq=False)
    ask_secret: SecretAsker | None = attrs.field(default=None, eq=False)
    ask_human: HumanAsker | None = attrs.field(default=None, eq=False)
    identity: str | None = None


@attrs.frozen(kw_only=True)
class ToolResult:
    """The model-facing ``text``, the JSON-able ``value``, and whether it is an error."""

    text: str
    value: Any = None
    is_error: bool = False


@attrs.frozen(kw_only=True)
class Tool:
    """A tool definition. ``render`` turns a value into text; ``finalize`` bounds any text.

    ``output_schema`` is the JSON schema of the value a successful call returns (an
    object); MCP clients receive it as the tool's ``outputSchema`` and check results
    against it. :meth:`schema` declares ``notices`` in it for every tool.

    ``parameters`` is the schema as the author writes it; :meth:`schema` offers it in
    the portable form (:func:`.toolschema.published`), optional arguments nullable.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    execute: Execute = attrs.field(eq=False)
    render: Render | None = attrs.field(default=None, eq=False)
    finalize: Finalize | None = attrs.field(default=None, eq=False)
    plugin: str | None = None
    output_schema: Mapping[str, Any] | None = None

    def schema(self) -> dict[str, Any]:
        """``{name, description, parameters, outputSchema?}`` as clients are offered them."""
        schema = {
            "name": self.name,
            "description": self.description,
            "parameters": published(self.parameters),
        }
        if self.output_schema is not None:
            output = dict(self.output_schema)
            output["properties"] = {**output.get("properties", {}), "notices": NOTICES_SCHEMA}
            schema["outputSchema"] = output
        return schema


@attrs.frozen(kw_only=True)
class ToolCall:
    """One finished call, as a :data:`CallObserver` is told of it.

    ``args`` are the arguments as the caller gave them. ``result`` is None when the call
    did not finish (cancelled); ``code`` is the stable error code of a failed call
    (``CANCELLED`` for a cancelled one), None for a success.
    """

    name: str
    args: object = attrs.field(eq=False)
    exec_: ToolExec = attrs.field(eq=False)
    result: ToolResult | None
    code: str | None
    duration_s: float


CallObserver = Callable[[ToolCall], None]
"""Told of every call :meth:`ToolRegistry.call` finishes, before its result is returned."""


def error_code(exc: BaseException) -> str:
    """The stable code ``render_error`` shows for ``exc``."""
    return exc.code if isinstance(exc, DshError) else ErrorCode.INTERNAL


def render_error(exc: BaseException) -> str:
    """``error [CODE]: message`` with the exception's stable code, ``INTERNAL`` otherwise."""
    if isinstance(exc, DshError):
        return f"error [{exc.code}]: {exc.message}"
    return f"error [INTERNAL]: {type(exc).__name__}: {exc}"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _describe_violation(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    subject = f"argument {where!r}" if where else "arguments"
    kind = error.validator
    if kind == "additionalProperties":
        allowed = set((error.schema.get("properties") or {}).keys())
        extra = sorted(k for k in error.instance if k not in allowed)
        known = ", ".join(sorted(allowed)) or "none"
        return f"unknown argument {', '.join(repr(k) for k in extra)} (known: {known})"
    if kind == "required":
        missing = [k for k in error.validator_value if k not in error.instance]
        return f"missing required argument {', '.join(repr(k) for k in missing)}"
    if kind == "type":
        return (
            f"{subject} must be of type {error.validator_value}, got {_json_type(error.instance)}"
        )
    if kind == "enum":
        options = ", ".join(repr(v) for v in error.validator_value)
        return f"{subject} must be one of {options}, got {error.instance!r}"
    if kind == "minimum":
        return f"{subject} must be >= {error.validator_value}, got {error.instance!r}"
    if kind == "maximum":
        return f"{subject} must be <= {error.validator_value}, got {error.instance!r}"
    if kind == "maxLength":
        return f"{subject} is longer than {error.validator_value} characters"
    if kind == "minLength":
        return f"{subject} must have at least {error.validator_value} character(s)"
    return f"{subject}: {error.message}"


class ToolRegistry:
    """Registered tools by name, with validation and error rendering around execute."""

    def __init__(self, stamp: Callable[[], str | None] | None = None) -> None:
        self._stamp = stamp
        # One entry per tool holds everything a call needs, found with one lookup.
        self._entries: dict[str, _Registered] = {}
        self._observers: list[CallObserver] = []

    def observe_calls(self, observer: CallObserver) -> Callable[[], None]:
        """Tell ``observer`` of every call from now on; returns a function that stops it.

        The observer runs synchronously once the call finished, before its result (or
        its cancellation) reaches the caller; an exception it raises is logged, never
        given to the caller. The audit log is one (SPEC §23).
        """
        self._observers.append(observer)

        def stop() -> None:
            if observer in self._observers:
                self._observers.remove(observer)

        return stop

    def register(self, tool: Tool) -> Callable[[], None]:
        """Add ``tool``; returns a function that removes it. Names are unique."""
        if tool.name in self._entries:
            owner = self._entries[tool.name].tool.plugin
            raise DshError(
                f"tool {tool.name!r} is already registered by {owner!r}", "DUPLICATE_TOOL"
            )
        if tool.plugin is None and self._stamp is not None:
            tool = attrs.evolve(tool, plugin=self._stamp())
        validator_cls = jsonschema.validators.validator_for(
            tool.parameters, jsonschema.Draft202012Validator
        )
        validator_cls.check_schema(tool.parameters)
        entry = _Registered(
            tool=tool,
            # Compiled once per schema: accepts the usual valid call without walking the
            # schema; anything it does not accept gets the full validator's verdict.
            check=compile_check(tool.parameters),
            validator=validator_cls(tool.parameters),
            drop_nulls=null_dropper(tool.parameters),
        )
        self._entries[tool.name] = entry

        def unregister() -> None:
            if self._entries.get(tool.name) is entry:
                del self._entries[tool.name]

        return unregister

    def unregister_plugin(self, plugin: str) -> list[str]:
        """Remove every tool stamped with ``plugin``; return their names."""
        names = [name for name, entry in self._entries.items() if entry.tool.plugin == plugin]
        for name in names:
            del self._entries[name]
        return names

    def get(self, name: str) -> Tool:
        return self._entry(name).tool

    def names(self) -> list[str]:
        return list(self._entries)

    def schemas(self) -> list[dict[str, Any]]:
        return [entry.tool.schema() for entry in self._entries.values()]

    def validate(self, name: str, args: object) -> dict[str, Any]:
        """Return ``args`` as a dict if they satisfy the schema; else raise INVALID_ARGUMENT."""
        return _checked(self._entry(name), args)

    async def call(self, name: str, args: object, exec_: ToolExec) -> ToolResult:
        """Validate, execute, render and bound one call. Never raises for tool failures.

        Every observer (:meth:`observe_calls`) is told of the call before it returns.
        One coroutine does it all: each frame a call passes through is an object the
        garbage collector traverses while the call is in flight.
        """
        observed = bool(self._observers)
        started = time.perf_counter() if observed else 0.0
        result: ToolResult | None = None
        code: str | None = ErrorCode.CANCELLED
        try:
            entry = self._entries.get(name)
            if entry is None:
                error = ToolNotFound(f"no tool named {name!r}")
                result, code = ToolResult(text=render_error(error), is_error=True), error.code
                return result
            tool = entry.tool
            try:
                checked = _checked(entry, args)
                value = await tool.execute(checked, exec_)
            except Exception as exc:
                text = self._bound(tool, render_error(exc))
                result = ToolResult(text=text, value=None, is_error=True)
                code = error_code(exc)
                return result
            text = tool.render(checked, value) if tool.render else _default_text(value)
            result, code = ToolResult(text=self._bound(tool, text), value=value), None
            return result
        finally:
            if observed:
                duration = time.perf_counter() - started
                self._tell(
                    ToolCall(
                        name=name,
                        args=args,
                        exec_=exec_,
                        result=result,
                        code=code,
                        duration_s=duration,
                    )
                )

    def _tell(self, call: ToolCall) -> None:
        # The observers run even when the call was cancelled: an audit keeps that too.
        for observer in list(self._observers):
            try:
                observer(call)
            except Exception:
                log.exception("a tool-call observer failed on %s", call.name)

    def _entry(self, name: str) -> _Registered:
        entry = self._entries.get(name)
        if entry is None:
            raise ToolNotFound(f"no tool named {name!r}")
        return entry

    @staticmethod
    def _bound(tool: Tool, text: str) -> str:
        return tool.finalize(text) if tool.finalize else text


@attrs.frozen(kw_only=True)
class _Registered:
    tool: Tool
    check: Check | None
    validator: jsonschema.protocols.Validator
    drop_nulls: NullDropper | None


def _checked(entry: _Registered, args: object) -> dict[str, Any]:
    """``args`` if the tool's schema accepts them; INVALID_ARGUMENT naming what is wrong.

    Optional arguments given as null are removed first: the published schema offers
    null for them, meaning "left out" (what a strict-mode model sends for each argument
    it does not use).
    """
    if not isinstance(args, dict):
        raise InvalidArgument(f"arguments must be a JSON object, got {_json_type(args)}")
    if entry.drop_nulls is not None:
        args = entry.drop_nulls(args)
    check = entry.check
    if check is not None and check(args):
        return args
    errors = sorted(entry.validator.iter_errors(args), key=lambda e: (len(e.path), e.path))
    if errors:
        raise InvalidArgument(
            f"{entry.tool.name}: " + "; ".join(_describe_violation(e) for e in errors[:5])
        )
    return args


def _default_text(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
