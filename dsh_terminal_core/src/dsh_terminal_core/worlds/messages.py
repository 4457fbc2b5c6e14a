"""The world protocol's messages: versions, wire codes, and the registry values on the wire.

A send crosses as one ``send`` request and comes back as one ``settled`` event carrying
the whole :class:`~dsh_terminal_core.registry.types.SendResult` the world's readiness
ladder decided; the harness rebuilds it from :func:`send_result_from_wire` and never
recomputes a fact. Errors cross with their stable code unchanged, so a
``SESSION_EXITED`` raised in the world is the same ``TerminalError`` in the harness.

Every ``*_from_wire`` refuses a value of the wrong shape with :class:`ProtocolError`
(``MALFORMED_FRAME``): a peer that sends one is closed, never trusted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..kernel.errors import DshError, TerminalError
from ..provider.listening import Listener
from ..registry.linematch import LineMatch
from ..registry.types import Highlight, ScreenView, SendResult, SessionStatus, WaitReason

__all__ = [
    "PROTOCOL_VERSIONS",
    "ProtocolError",
    "error_from_wire",
    "error_to_wire",
    "highlights_from_wire",
    "pattern_from_wire",
    "pattern_to_wire",
    "send_result_from_wire",
    "send_result_to_wire",
    "status_from_wire",
    "status_to_wire",
]

#: Versions this side speaks, oldest first; ``hello`` picks the highest both know.
PROTOCOL_VERSIONS: tuple[int, ...] = (1,)


class ProtocolError(Exception):
    """The peer broke the protocol; ``code`` is the wire code it is told before closing."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _malformed(what: str) -> ProtocolError:
    return ProtocolError("MALFORMED_FRAME", f"malformed {what}")


def field(header: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``header[name]`` if it is of ``kind`` (bool is never an int here)."""
    value = header.get(name)
    if isinstance(value, bool) and kind is int:
        raise _malformed(f"{name!r}")
    if not isinstance(value, kind):
        raise _malformed(f"{name!r}")
    return value


def optional(header: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    """``header[name]`` if present and of ``kind``, None if absent or null."""
    if header.get(name) is None:
        return None
    return field(header, name, kind)


def status_to_wire(status: SessionStatus) -> dict[str, Any]:
    return {"kind": status.kind, "exitCode": status.exit_code, "signal": status.signal}


def status_from_wire(wire: object) -> SessionStatus:
    if not isinstance(wire, dict) or wire.get("kind") not in ("running", "exited"):
        raise _malformed("status")
    if wire["kind"] == "running":
        return SessionStatus.running()
    return SessionStatus(
        kind="exited",
        exit_code=optional(wire, "exitCode", int),
        signal=optional(wire, "signal", str),
    )


def _listener_to_wire(found: Listener) -> dict[str, Any]:
    return {
        "address": found.address,
        "port": found.port,
        "pid": found.pid,
        "command": found.command,
        "inode": found.inode,
    }


def _listener_from_wire(wire: object) -> Listener:
    if not isinstance(wire, dict):
        raise _malformed("listener")
    return Listener(
        address=field(wire, "address", str),
        port=optional(wire, "port", int),
        pid=field(wire, "pid", int),
        command=field(wire, "command", str),
        inode=field(wire, "inode", int),
    )


def highlights_from_wire(wire: object) -> tuple[Highlight, ...]:
    """A screen's ``highlights`` as sent by a world (absent: none)."""
    if wire is None:
        return ()
    if not isinstance(wire, list) or not all(isinstance(mark, dict) for mark in wire):
        raise _malformed("highlights")
    return tuple(
        Highlight(
            row=field(mark, "row", int), col=field(mark, "col", int), text=field(mark, "text", str)
        )
        for mark in wire
    )


def send_result_to_wire(result: SendResult) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "viewport": result.viewport,
        "waitReason": str(result.wait_reason),
        "status": status_to_wire(result.session_status),
        "truncated": result.truncated,
        "exitCode": result.exit_code,
        "inputHidden": result.input_hidden,
        "alternateScreen": result.alternate_screen,
    }
    if result.screen is not None:
        wire["screen"] = result.screen.to_wire()
    if result.match is not None:
        wire["match"] = result.match.to_wire()
    if result.listening:
        wire["listening"] = [_listener_to_wire(found) for found in result.listening]
    if result.periodic:
        wire["periodic"] = True
    return wire


def send_result_from_wire(wire: object) -> SendResult:
    if not isinstance(wire, dict):
        raise _malformed("settlement")
    try:
        reason = WaitReason(field(wire, "waitReason", str))
    except ValueError:
        raise _malformed("waitReason") from None
    screen = None
    if (shown := wire.get("screen")) is not None:
        if not isinstance(shown, dict):
            raise _malformed("screen")
        cursor = field(shown, "cursor", list)
        if len(cursor) != 2 or not all(isinstance(c, int) for c in cursor):
            raise _malformed("cursor")
        screen = ScreenView(
            text=field(shown, "text", str),
            cursor=(cursor[0], cursor[1]),
            alternate=field(shown, "alternate", bool),
            highlights=highlights_from_wire(shown.get("highlights")),
        )
    match = None
    if (matched := wire.get("match")) is not None:
        if not isinstance(matched, dict):
            raise _malformed("match")
        match = LineMatch(
            line=field(matched, "line", str), line_number=field(matched, "lineNumber", int)
        )
    listening = wire.get("listening") or []
    if not isinstance(listening, list):
        raise _malformed("listening")
    return SendResult(
        viewport=field(wire, "viewport", str),
        wait_reason=reason,
        session_status=status_from_wire(wire.get("status")),
        truncated=field(wire, "truncated", bool),
        exit_code=optional(wire, "exitCode", int),
        input_hidden=field(wire, "inputHidden", bool),
        screen=screen,
        alternate_screen=field(wire, "alternateScreen", bool),
        match=match,
        listening=tuple(_listener_from_wire(found) for found in listening),
        periodic=wire.get("periodic") is True,
    )


def listeners_to_wire(found: tuple[Listener, ...]) -> list[dict[str, Any]]:
    return [_listener_to_wire(one) for one in found]


def listeners_from_wire(wire: object) -> tuple[Listener, ...]:
    if not isinstance(wire, list):
        raise _malformed("listening")
    return tuple(_listener_from_wire(one) for one in wire)


def error_to_wire(exc: BaseException) -> dict[str, Any]:
    """An ``error`` answer's fields: the stable code and message, and a TerminalError's advice."""
    if isinstance(exc, TerminalError):
        return {"code": exc.code, "message": exc.fact, "advice": exc.advice}
    if isinstance(exc, DshError):
        return {"code": exc.code, "message": exc.message}
    return {"code": "INTERNAL", "message": f"{type(exc).__name__}: {exc}"}


def error_from_wire(wire: Mapping[str, Any], world: str) -> TerminalError:
    """The world's refusal as the harness raises it: same code, same words."""
    code = wire.get("code") if isinstance(wire.get("code"), str) else "INTERNAL"
    message = wire.get("message") if isinstance(wire.get("message"), str) else "no message"
    advice = wire.get("advice") if isinstance(wire.get("advice"), str) else None
    if f"world {world!r}" not in message:
        message = f"world {world!r}: {message}"
    return TerminalError(str(message), str(code), advice=advice)


def pattern_to_wire(pattern: re.Pattern[str]) -> dict[str, Any]:
    """A ``waitFor`` pattern as the world recompiles it (the same rules on both sides)."""
    return {"pattern": pattern.pattern, "flags": int(pattern.flags & ~re.UNICODE)}


def pattern_from_wire(wire: object) -> re.Pattern[str]:
    from ..registry.linematch import compile_line_pattern

    if not isinstance(wire, dict):
        raise _malformed("waitFor")
    source = field(wire, "pattern", str)
    flags = field(wire, "flags", int)
    compiled = compile_line_pattern(source, "waitFor")
    if flags:
        compiled = re.compile(compiled.pattern, flags)
    return compiled
