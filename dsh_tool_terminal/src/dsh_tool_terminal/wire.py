"""The camelCase wire values the tools return, and their conversions from service results.

Each value is a ``TypedDict`` that a tool in :mod:`.tools` declares as its return type,
so it is also that tool's MCP ``outputSchema``
(:func:`~dsh_terminal_core.kernel.tooldecl.tool` derives it). ``SendOutput`` and
``ReadOutput`` add what a ``TypedDict`` cannot say: the description of the whole value
and, for a read, which fields go together.
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict

from dsh_terminal_core.kernel.tooldecl import Raw
from dsh_terminal_core.provider import ListenerValue
from dsh_terminal_core.registry import (
    HumanReportValue,
    ReadResult,
    ScreenRead,
    ScreenValue,
    SendResult,
    SessionStatusValue,
    Snapshot,
    SpawnResult,
    WaitReason,
)
from dsh_terminal_core.registry.linematch import LineMatchValue

__all__ = [
    "CloseValue",
    "ListValue",
    "OpenValue",
    "ReadOutput",
    "ReadValue",
    "ResizeValue",
    "SendOutput",
    "SendValue",
    "SessionValue",
    "SignalValue",
    "read_value",
    "screen_read_value",
    "send_value",
    "snapshot_value",
    "spawn_value",
]

Screen = Annotated[ScreenValue, "The visible screen; cursor is [row, column] from 0."]
Human = Annotated[
    HumanReportValue,
    "Once, after a person took control of the session and handed it back: when, and the "
    "lines printed meanwhile (numbered as terminal_read counts, both included).",
]
Listening = Annotated[
    list[ListenerValue],
    "Sockets the session's processes listen on (TCP: address and port; a unix socket: "
    "its path and port null), with the process holding each.",
]
WaitReasonName = Annotated[str, Raw({"enum": [str(reason) for reason in WaitReason]})]


class OpenValue(TypedDict):
    sessionId: str
    name: NotRequired[str]
    type: str
    pid: int
    status: SessionStatusValue
    motd: str
    world: Annotated[str, "The execution world it runs in ('local': this host)."]


class SendValue(TypedDict):
    kind: Literal["foreground", "background"]
    viewport: NotRequired[str]
    waitReason: NotRequired[WaitReasonName]
    sessionStatus: NotRequired[SessionStatusValue]
    truncated: NotRequired[bool]
    exitCode: NotRequired[int | None]
    inputHidden: NotRequired[bool]
    screen: NotRequired[Screen]
    alternateScreen: NotRequired[bool]
    jobId: NotRequired[str]
    match: NotRequired[
        Annotated[
            LineMatchValue,
            "With waitReason 'matched': the line, numbered as terminal_read counts.",
        ]
    ]
    listening: NotRequired[Listening]
    periodic: NotRequired[
        Annotated[
            bool,
            "With waitReason 'inferred_idle': the program redraws on a clock and never "
            "reads keys (watch, tail -f); it keeps running.",
        ]
    ]
    human: NotRequired[Human]


SendOutput = Annotated[
    SendValue, "kind 'foreground': the settled send; kind 'background': only jobId."
]


class MoreValue(TypedDict):
    offset: int


class ReadValue(TypedDict, total=False):
    """A page of lines, or (``screen=true``) the screen and the window size."""

    text: str
    totalLines: int
    lineBegin: int
    lineEnd: int
    truncated: bool
    more: Annotated[
        MoreValue,
        "Present when lines follow this page: call terminal_read with this offset for "
        "the next one.",
    ]
    screen: Screen
    human: Human
    rows: int
    cols: int


ReadOutput = Annotated[
    ReadValue,
    Raw(
        {
            "anyOf": [
                {"required": ["text", "totalLines", "lineBegin", "lineEnd", "truncated"]},
                {"required": ["screen", "rows", "cols"]},
            ]
        }
    ),
    "Lines lineBegin..lineEnd, numbered from 1, both included; with screen=true the "
    "visible screen and the window size instead.",
]


class ResizeValue(TypedDict):
    rows: int
    cols: int


class SignalValue(TypedDict):
    delivered: bool
    targetPgid: int


class CloseValue(TypedDict):
    closed: bool


class SessionValue(TypedDict):
    sessionId: str
    name: str | None
    type: str
    pid: int
    status: SessionStatusValue
    cwd: str | None
    listening: NotRequired[Listening]
    openedBy: Annotated[
        str | None,
        "Which tools opened it: 'terminal' (terminal_open), 'pty' (pty_open), 'ssh' "
        "(ssh_open; drive it with ssh_run), or a plugin's own name; null when not said.",
    ]
    world: Annotated[str, "The execution world it runs in ('local': this host)."]


class ListValue(TypedDict):
    sessions: list[SessionValue]


def spawn_value(result: SpawnResult) -> OpenValue:
    value: OpenValue = {
        "sessionId": result.session_id,
        "type": result.type,
        "pid": result.pid,
        "status": result.status.to_wire(),
        "motd": result.motd,
        "world": result.world,
    }
    if result.name is not None:
        value["name"] = result.name
    return value


def send_value(result: SendResult) -> SendValue:
    value: SendValue = {
        "kind": "foreground",
        "viewport": result.viewport,
        "waitReason": str(result.wait_reason),
        "sessionStatus": result.session_status.to_wire(),
        "truncated": result.truncated,
        "exitCode": result.exit_code,
        "inputHidden": result.input_hidden,
    }
    if result.screen is not None:
        value["screen"] = result.screen.to_wire()
    if result.alternate_screen:
        value["alternateScreen"] = True
    if result.match is not None:
        value["match"] = result.match.to_wire()
    if result.listening:
        value["listening"] = [found.to_wire() for found in result.listening]
    if result.periodic:
        value["periodic"] = True
    return value


def screen_read_value(result: ScreenRead) -> ReadValue:
    return {"screen": result.screen.to_wire(), "rows": result.rows, "cols": result.cols}


def read_value(result: ReadResult) -> ReadValue:
    """Line numbers as every surface counts them: from 1, ``lineEnd`` inclusive.

    ``lineBegin..lineEnd`` = the lines shown, so ``lineEnd < lineBegin`` means none.
    ``more`` says where the next page starts when lines follow this one: the same
    hint as the text's ``[more: terminal_read offset=N]`` line, for clients that hand
    their model only the value.
    """
    value: ReadValue = {
        "text": result.text,
        "totalLines": result.total_lines,
        "lineBegin": result.line_begin,
        "lineEnd": result.line_end,
        "truncated": result.truncated,
    }
    if result.line_end < result.total_lines:
        value["more"] = {"offset": max(result.line_end + 1, result.line_begin)}
    return value


def snapshot_value(snapshot: Snapshot) -> SessionValue:
    value: SessionValue = {
        "sessionId": snapshot.session_id,
        "type": snapshot.type,
        "pid": snapshot.pid,
        "status": snapshot.status.to_wire(),
        "cwd": snapshot.cwd,
        "name": snapshot.name,
        "openedBy": snapshot.opened_by,
        "world": snapshot.world,
    }
    if snapshot.listening:
        value["listening"] = [found.to_wire() for found in snapshot.listening]
    return value
