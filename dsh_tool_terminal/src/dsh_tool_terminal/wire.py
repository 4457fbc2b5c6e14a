"""Conversions from service results to the camelCase wire values the tools return."""

from __future__ import annotations

from typing import Any

from dsh_terminal_core.registry import (
    STATUS_SCHEMA,
    ReadResult,
    ScreenRead,
    SendResult,
    Snapshot,
    SpawnResult,
    WaitReason,
)

__all__ = [
    "CLOSE_SCHEMA",
    "LIST_SCHEMA",
    "OPEN_SCHEMA",
    "READ_SCHEMA",
    "RESIZE_SCHEMA",
    "SEND_SCHEMA",
    "SIGNAL_SCHEMA",
    "read_value",
    "screen_read_value",
    "send_value",
    "snapshot_value",
    "spawn_value",
]

# JSON schemas of the values below: each tool's MCP ``outputSchema``.
_NULLABLE_STRING = {"type": ["string", "null"]}
_SCREEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The visible screen; cursor is [row, column] from 0.",
    "properties": {
        "text": {"type": "string"},
        "cursor": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
        "alternate": {"type": "boolean"},
    },
    "required": ["text", "cursor", "alternate"],
}
_LISTENING_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": (
        "Sockets the session's processes listen on (TCP: address and port; a unix socket: "
        "its path and port null), with the process holding each."
    ),
    "items": {
        "type": "object",
        "properties": {
            "address": {"type": "string"},
            "port": {"type": ["integer", "null"]},
            "pid": {"type": "integer"},
            "command": {"type": "string"},
        },
        "required": ["address", "port", "pid", "command"],
    },
}
OPEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessionId": {"type": "string"},
        "name": {"type": "string"},
        "type": {"type": "string"},
        "pid": {"type": "integer"},
        "status": STATUS_SCHEMA,
        "motd": {"type": "string"},
    },
    "required": ["sessionId", "type", "pid", "status", "motd"],
}
SEND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "kind 'foreground': the settled send; kind 'background': only jobId.",
    "properties": {
        "kind": {"enum": ["foreground", "background"]},
        "viewport": {"type": "string"},
        "waitReason": {"enum": [str(reason) for reason in WaitReason]},
        "sessionStatus": STATUS_SCHEMA,
        "truncated": {"type": "boolean"},
        "exitCode": {"type": ["integer", "null"]},
        "inputHidden": {"type": "boolean"},
        "screen": _SCREEN_SCHEMA,
        "alternateScreen": {"type": "boolean"},
        "jobId": {"type": "string"},
        "match": {
            "type": "object",
            "description": "With waitReason 'matched': the line, numbered as terminal_read counts.",
            "properties": {"line": {"type": "string"}, "lineNumber": {"type": "integer"}},
            "required": ["line", "lineNumber"],
        },
        "listening": _LISTENING_SCHEMA,
    },
    "required": ["kind"],
}
READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "Lines lineBegin..lineEnd, numbered from 1, both included; with screen=true the "
        "visible screen and the window size instead."
    ),
    "properties": {
        "text": {"type": "string"},
        "totalLines": {"type": "integer"},
        "lineBegin": {"type": "integer"},
        "lineEnd": {"type": "integer"},
        "truncated": {"type": "boolean"},
        "more": {
            "type": "object",
            "description": (
                "Present when lines follow this page: call terminal_read with this offset "
                "for the next one."
            ),
            "properties": {"offset": {"type": "integer"}},
            "required": ["offset"],
        },
        "screen": _SCREEN_SCHEMA,
        "rows": {"type": "integer"},
        "cols": {"type": "integer"},
    },
    "anyOf": [
        {"required": ["text", "totalLines", "lineBegin", "lineEnd", "truncated"]},
        {"required": ["screen", "rows", "cols"]},
    ],
}
RESIZE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"rows": {"type": "integer"}, "cols": {"type": "integer"}},
    "required": ["rows", "cols"],
}
SIGNAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"delivered": {"type": "boolean"}, "targetPgid": {"type": "integer"}},
    "required": ["delivered", "targetPgid"],
}
CLOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"closed": {"type": "boolean"}},
    "required": ["closed"],
}
LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "sessions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "sessionId": {"type": "string"},
                    "name": _NULLABLE_STRING,
                    "type": {"type": "string"},
                    "pid": {"type": "integer"},
                    "status": STATUS_SCHEMA,
                    "cwd": _NULLABLE_STRING,
                    "listening": _LISTENING_SCHEMA,
                    "openedBy": {
                        "type": ["string", "null"],
                        "description": (
                            "Which tools opened it: 'terminal' (terminal_open), 'pty' "
                            "(pty_open), 'ssh' (ssh_open; drive it with ssh_run), or a "
                            "plugin's own name; null when not said."
                        ),
                    },
                },
                "required": ["sessionId", "name", "type", "pid", "status", "cwd", "openedBy"],
            },
        }
    },
    "required": ["sessions"],
}


def spawn_value(result: SpawnResult) -> dict[str, Any]:
    value: dict[str, Any] = {
        "sessionId": result.session_id,
        "type": result.type,
        "pid": result.pid,
        "status": result.status.to_wire(),
        "motd": result.motd,
    }
    if result.name is not None:
        value["name"] = result.name
    return value


def send_value(result: SendResult) -> dict[str, Any]:
    value: dict[str, Any] = {
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
    return value


def screen_read_value(result: ScreenRead) -> dict[str, Any]:
    return {"screen": result.screen.to_wire(), "rows": result.rows, "cols": result.cols}


def read_value(result: ReadResult) -> dict[str, Any]:
    """Line numbers as a person reads them: 1-based, ``lineEnd`` inclusive.

    The service counts from 0 with an exclusive end; the model sees
    ``lineBegin..lineEnd`` = the lines shown, so ``lineEnd < lineBegin`` means none.
    ``more`` says where the next page starts when lines follow this one: the same
    hint as the text's ``[more: terminal_read offset=N]`` line, for clients that hand
    their model only the value.
    """
    value: dict[str, Any] = {
        "text": result.text,
        "totalLines": result.total_lines,
        "lineBegin": result.line_begin + 1,
        "lineEnd": result.line_end,
        "truncated": result.truncated,
    }
    if result.line_end < result.total_lines:
        value["more"] = {"offset": max(result.line_end, result.line_begin) + 1}
    return value


def snapshot_value(snapshot: Snapshot) -> dict[str, Any]:
    value: dict[str, Any] = {
        "sessionId": snapshot.session_id,
        "type": snapshot.type,
        "pid": snapshot.pid,
        "status": snapshot.status.to_wire(),
        "cwd": snapshot.cwd,
    }
    value["name"] = snapshot.name
    value["openedBy"] = snapshot.opened_by
    if snapshot.listening:
        value["listening"] = [found.to_wire() for found in snapshot.listening]
    return value
