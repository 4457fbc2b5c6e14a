"""Conversions from service results to the camelCase wire values the tools return."""

from __future__ import annotations

from typing import Any

from dsh_terminal_core.terminals import ReadResult, SendResult, Snapshot, SpawnResult

__all__ = ["read_value", "send_value", "snapshot_value", "spawn_value"]


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
    return {
        "kind": "foreground",
        "viewport": result.viewport,
        "waitReason": str(result.wait_reason),
        "sessionStatus": result.session_status.to_wire(),
        "truncated": result.truncated,
        "exitCode": result.exit_code,
        "inputHidden": result.input_hidden,
    }


def read_value(result: ReadResult) -> dict[str, Any]:
    return {
        "text": result.text,
        "totalLines": result.total_lines,
        "lineBegin": result.line_begin,
        "lineEnd": result.line_end,
        "truncated": result.truncated,
    }


def snapshot_value(snapshot: Snapshot) -> dict[str, Any]:
    value: dict[str, Any] = {
        "sessionId": snapshot.session_id,
        "type": snapshot.type,
        "pid": snapshot.pid,
        "status": snapshot.status.to_wire(),
        "cwd": snapshot.cwd,
    }
    value["name"] = snapshot.name
    return value
