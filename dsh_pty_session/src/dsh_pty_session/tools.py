"""The four ``pty_*`` tools: the same kernel as ``ctx.pty``, another surface.

Each tool is a thin call into :class:`~dsh_pty_session.PtySessionService` with the
calling agent as owner, so a model and a plugin share one cursor and one set of sessions.
The service is looked up on every call rather than captured at registration, which lets
a host or a test replace services (e.g. the ``terminals`` registry under the facade)
before first use.

The registry under the facade also serves the ``terminal_*`` tools, and its refusals
advise those (``terminal_list shows the open ones``). A model holding only the ``pty_*``
tools is told what to do with them instead (:func:`_for_pty`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh_terminal_core import MAX_RESULT_BYTES, cap_text
from dsh_terminal_core.kernel.errors import ErrorCode, TerminalError
from dsh_terminal_core.kernel.tools import Execute, Tool, ToolExec
from dsh_terminal_core.registry import STATUS_SCHEMA, status_text

from .service import PtySessionService

__all__ = ["pty_tools"]


# JSON schemas of the four values: each tool's MCP ``outputSchema``.
OPEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessionId": {"type": "string"},
        "pid": {"type": "integer"},
        "status": STATUS_SCHEMA,
        "initialOutput": {"type": "string"},
    },
    "required": ["sessionId", "pid", "status", "initialOutput"],
}
SEND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"delta": {"type": "string"}, "status": STATUS_SCHEMA},
    "required": ["delta", "status"],
}
TAIL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "lines": {"type": "integer"},
        "truncated": {"type": "boolean"},
    },
    "required": ["text", "lines", "truncated"],
}
CLOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"closed": {"type": "boolean"}},
    "required": ["closed"],
}

_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "description": "Session id from pty_open.",
}

# What to do next, said with the pty_* tools, for the refusals whose advice names others.
_PTY_ADVICE: dict[str, str] = {
    ErrorCode.NO_SESSION: "pty_open starts a session and returns its id",
    ErrorCode.SESSION_LIMIT: "close sessions you no longer need with pty_close",
    ErrorCode.SESSION_EXITED: "pty_tail still returns its last lines; pty_close it and "
    "pty_open a new one",
}


def _for_pty(exc: TerminalError, session_id: object) -> TerminalError:
    """``exc`` as a ``pty_*`` caller should read it: the same code and fact, pty advice.

    ``SEND_ACTIVE`` comes from the backend with its advice written into the message
    (``interrupt it with terminal_signal``), and there is no pty tool to interrupt
    with, so its whole message is the pty one. Other refusals pass unchanged.
    """
    if exc.code == ErrorCode.SEND_ACTIVE:
        return TerminalError(
            f"session {session_id} is still busy with another send",
            exc.code,
            advice="wait for that pty_send to return; pty_close ends the session and "
            "everything running in it",
        )
    advice = _PTY_ADVICE.get(exc.code)
    if advice is None:
        return exc
    fact = exc.fact if exc.advice is not None else exc.message
    return TerminalError(fact, exc.code, advice=advice)


def _pty_errors(execute: Execute) -> Execute:
    """Run ``execute``, giving its session refusals pty advice (:func:`_for_pty`)."""

    async def run(args: dict[str, Any], exec_: ToolExec) -> Any:
        try:
            return await execute(args, exec_)
        except TerminalError as exc:
            advised = _for_pty(exc, args.get("id"))
            if advised is exc:
                raise
            raise advised from exc

    return run


def pty_tools(pty: Callable[[], PtySessionService]) -> list[Tool]:
    """Build ``pty_open``, ``pty_send``, ``pty_tail`` and ``pty_close`` over ``pty()``."""

    def finalize(text: str) -> str:
        return cap_text(text, MAX_RESULT_BYTES)

    async def open_(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        return (await pty().open(exec_.agent, args, exec_.cancel)).to_wire()

    async def send(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        service = pty()
        # Refused like terminal_send: an exited session has nothing to type into. A send
        # in flight when its program exits still returns, with status exited.
        status = service.status(exec_.agent, args["id"])
        if status.kind == "exited":
            raise TerminalError(
                f"session {args['id']} has {status_text(status.to_wire())}; nothing was sent",
                ErrorCode.SESSION_EXITED,
                advice=_PTY_ADVICE[ErrorCode.SESSION_EXITED],
            )
        return (await service.send(exec_.agent, args["id"], args, exec_.cancel)).to_wire()

    async def tail(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        return pty().tail(exec_.agent, args["id"], args.get("lines")).to_wire()

    async def close(args: dict[str, Any], exec_: ToolExec) -> dict[str, Any]:
        return {"closed": await pty().close(exec_.agent, args["id"])}

    def render_open(_args: dict[str, Any], v: dict[str, Any]) -> str:
        head = f"opened {v['sessionId']} (pid {v['pid']}, {status_text(v['status'])})\n"
        return cap_text(v["initialOutput"], MAX_RESULT_BYTES, prefix=head, keep="tail")

    def render_send(_args: dict[str, Any], v: dict[str, Any]) -> str:
        newline = "\n" if v["delta"] and not v["delta"].endswith("\n") else ""
        suffix = f"{newline}[{status_text(v['status'])}]"
        return cap_text(v["delta"], MAX_RESULT_BYTES, suffix=suffix, keep="tail")

    def render_tail(args: dict[str, Any], v: dict[str, Any]) -> str:
        skipped = "; older new lines skipped" if v["truncated"] else ""
        head = f"[{v['lines']} new line(s){skipped}]\n"
        return cap_text(v["text"], MAX_RESULT_BYTES, prefix=head, keep="tail")

    def render_close(args: dict[str, Any], v: dict[str, Any]) -> str:
        return f"closed {args['id']}" if v["closed"] else f"{args['id']} was already closed"

    return [
        Tool(
            name="pty_open",
            description=(
                "Start a command in a new persistent PTY session (run inside a shell) and return "
                "its id and the output it printed first. env values are exported exactly."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "minLength": 1, "maxLength": 100000},
                    "cwd": {"type": "string", "minLength": 1, "maxLength": 4096},
                    "env": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Environment variables to export before the command.",
                    },
                },
                "required": ["command"],
                "additionalProperties": False,
            },
            execute=_pty_errors(open_),
            output_schema=OPEN_SCHEMA,
            render=render_open,
            finalize=finalize,
        ),
        Tool(
            name="pty_send",
            description=(
                "Write data to a PTY session (Enter appended unless submit=false, which sends "
                "the exact bytes) and return the output read while it settles."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "id": _ID,
                    "data": {"type": "string", "maxLength": 1000000},
                    "submit": {"type": "boolean"},
                },
                "required": ["id", "data"],
                "additionalProperties": False,
            },
            execute=_pty_errors(send),
            output_schema=SEND_SCHEMA,
            render=render_send,
            finalize=finalize,
        ),
        Tool(
            name="pty_tail",
            description=(
                "Return the complete lines a PTY session printed since the previous pty_tail "
                "(never repeated); at most `lines` of the newest. A line still being written "
                "(e.g. a prompt without newline) appears once it is complete."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "id": _ID,
                    "lines": {"type": "integer", "minimum": 1, "maximum": 10000},
                },
                "required": ["id"],
                "additionalProperties": False,
            },
            execute=_pty_errors(tail),
            output_schema=TAIL_SCHEMA,
            render=render_tail,
            finalize=finalize,
        ),
        Tool(
            name="pty_close",
            description=(
                "Close a PTY session and end its processes; closed=false if it was already gone."
            ),
            parameters={
                "type": "object",
                "properties": {"id": _ID},
                "required": ["id"],
                "additionalProperties": False,
            },
            execute=_pty_errors(close),
            output_schema=CLOSE_SCHEMA,
            render=render_close,
            finalize=finalize,
        ),
    ]
