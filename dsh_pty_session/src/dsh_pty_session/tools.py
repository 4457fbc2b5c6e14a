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

import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, NotRequired, TypedDict, TypeVar

from dsh_terminal_core import MAX_RESULT_BYTES, cap_text
from dsh_terminal_core.kernel.errors import ErrorCode, TerminalError
from dsh_terminal_core.kernel.tooldecl import Range, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.registry import status_text

from .service import PtySessionService
from .types import PtyOpenedValue, PtySentValue, PtyTailValue

__all__ = ["pty_tools"]

SessionId = Annotated[str, Text(1, 64), "Session id from pty_open."]


class OpenArgs(TypedDict):
    command: Annotated[str, Text(1, 100000)]
    cwd: NotRequired[Annotated[str, Text(1, 4096)]]
    env: NotRequired[
        Annotated[dict[str, str], "Environment variables to export before the command."]
    ]


class SendArgs(TypedDict):
    id: SessionId
    data: Annotated[str, Text(max_length=1000000)]
    submit: NotRequired[bool]


class TailArgs(TypedDict):
    id: SessionId
    lines: NotRequired[Annotated[int, Range(1, 10000)]]


class CloseArgs(TypedDict):
    id: SessionId


class Closed(TypedDict):
    closed: bool


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


Args = TypeVar("Args", bound=Mapping[str, object])
Value = TypeVar("Value")


def _finalize(text: str) -> str:
    return cap_text(text, MAX_RESULT_BYTES)


def _pty_tool(
    name: str, *, description: str, render: Callable[[Args, Value], str]
) -> Callable[[Callable[[Args, ToolExec], Awaitable[Value]]], Tool]:
    """:func:`tool`, the text bounded, session refusals given pty advice (:func:`_for_pty`)."""
    declare = tool(name, description=description, render=render, finalize=_finalize)

    def advised(execute: Callable[[Args, ToolExec], Awaitable[Value]]) -> Tool:
        @functools.wraps(execute)
        async def run(args: Args, exec_: ToolExec) -> Value:
            try:
                return await execute(args, exec_)
            except TerminalError as exc:
                advised = _for_pty(exc, args.get("id"))
                if advised is exc:
                    raise
                raise advised from exc

        return declare(run)

    return advised


def _render_open(_args: OpenArgs, v: PtyOpenedValue) -> str:
    head = f"opened {v['sessionId']} (pid {v['pid']}, {status_text(v['status'])})\n"
    return cap_text(v["initialOutput"], MAX_RESULT_BYTES, prefix=head, keep="tail")


def _render_send(_args: SendArgs, v: PtySentValue) -> str:
    newline = "\n" if v["delta"] and not v["delta"].endswith("\n") else ""
    suffix = f"{newline}[{status_text(v['status'])}]"
    return cap_text(v["delta"], MAX_RESULT_BYTES, suffix=suffix, keep="tail")


def _render_tail(_args: TailArgs, v: PtyTailValue) -> str:
    skipped = "; older new lines skipped" if v["truncated"] else ""
    head = f"[{v['lines']} new line(s){skipped}]\n"
    return cap_text(v["text"], MAX_RESULT_BYTES, prefix=head, keep="tail")


def _render_close(args: CloseArgs, v: Closed) -> str:
    return f"closed {args['id']}" if v["closed"] else f"{args['id']} was already closed"


def pty_tools(pty: Callable[[], PtySessionService]) -> list[Tool]:
    """Build ``pty_open``, ``pty_send``, ``pty_tail`` and ``pty_close`` over ``pty()``."""

    @_pty_tool(
        "pty_open",
        description=(
            "Start a command in a new persistent PTY session (run inside a shell) and return "
            "its id and the output it printed first. env values are exported exactly."
        ),
        render=_render_open,
    )
    async def pty_open(args: OpenArgs, exec_: ToolExec) -> PtyOpenedValue:
        return (await pty().open(exec_.agent, args, exec_.cancel)).to_wire()

    @_pty_tool(
        "pty_send",
        description=(
            "Write data to a PTY session (Enter appended unless submit=false, which sends "
            "the exact bytes) and return the output read while it settles."
        ),
        render=_render_send,
    )
    async def pty_send(args: SendArgs, exec_: ToolExec) -> PtySentValue:
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

    @_pty_tool(
        "pty_tail",
        description=(
            "Return the complete lines a PTY session printed since the previous pty_tail "
            "(never repeated); at most `lines` of the newest. A line still being written "
            "(e.g. a prompt without newline) appears once it is complete."
        ),
        render=_render_tail,
    )
    async def pty_tail(args: TailArgs, exec_: ToolExec) -> PtyTailValue:
        return pty().tail(exec_.agent, args["id"], args.get("lines")).to_wire()

    @_pty_tool(
        "pty_close",
        description="Close a PTY session and end its processes; closed=false if it was "
        "already gone.",
        render=_render_close,
    )
    async def pty_close(args: CloseArgs, exec_: ToolExec) -> Closed:
        return {"closed": await pty().close(exec_.agent, args["id"])}

    return [pty_open, pty_send, pty_tail, pty_close]
