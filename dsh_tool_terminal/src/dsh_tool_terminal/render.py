"""Model-facing text for terminal tool values: compact, bounded, with status lines."""

from __future__ import annotations

from dsh_terminal_core import cap_text
from dsh_terminal_core.provider import ListenerValue
from dsh_terminal_core.registry import ScreenValue, status_text

from .wire import CloseValue, ListValue, OpenValue, ReadValue, SendValue, SignalValue

__all__ = [
    "listening_text",
    "render_close",
    "render_list",
    "render_open",
    "render_read",
    "render_screen_read",
    "render_send",
    "render_signal",
    "status_line",
]


def status_line(value: SendValue) -> str:
    """One line saying why the send returned and what that does (not) prove."""
    reason = value["waitReason"]
    session = value["sessionStatus"]
    if reason == "stdin_read":
        parts = ["waiting for input"]
        if value.get("exitCode") is not None:
            parts.append(f"exit code {value['exitCode']}")
        if value.get("inputHidden"):
            parts.append("input hidden (echo off: likely a password prompt)")
        text = "; ".join(parts)
    elif reason == "inferred_idle":
        text = "no output for a while; the command may still be running"
    elif reason == "timeout":
        text = "time limit reached; the command may still be running"
    elif reason == "matched":
        match = value.get("match")
        number = match["lineNumber"] if match is not None else None
        text = f"line {number} matched waitFor; the program keeps running"
    else:
        text = f"session {status_text(session)}"
    if reason == "inferred_idle" and value.get("listening"):
        text = "a server came up and its output paused; it keeps running"
    if reason == "inferred_idle" and value.get("periodic"):
        text = (
            "the program redraws on a clock and never reads keys (periodic); it keeps "
            "running: read again, wait again, or interrupt it"
        )
    trunc = "; output shortened to fit, as marked above" if value.get("truncated") else ""
    line = f"[{reason}: {text}{trunc}]"
    listening = value.get("listening")
    if listening:
        line += f"\n[listening: {listening_text(listening)}]"
    return line


def listening_text(listening: list[ListenerValue], limit: int = 8) -> str:
    """Where a session's processes listen, one entry each: ``127.0.0.1:8000 (pid 7 cmd)``."""
    parts = []
    for entry in listening[:limit]:
        where = entry["address"]
        if entry["port"] is not None:
            host = f"[{where}]" if ":" in where else where
            where = f"{host}:{entry['port']}"
        command = entry["command"]
        command = command if len(command) <= 60 else command[:59] + "…"
        parts.append(f"{where} (pid {entry['pid']} {command})")
    more = f", and {len(listening) - limit} more" if len(listening) > limit else ""
    return ", ".join(parts) + more


def render_open(value: OpenValue, max_bytes: int) -> str:
    name = f" ({value['name']})" if value.get("name") else ""
    where = f" in world {value['world']}" if value.get("world", "local") != "local" else ""
    head = f"started terminal session {value['sessionId']}{name} [type: {value['type']}]{where}"
    motd = value.get("motd") or ""
    return cap_text(motd, max_bytes, prefix=head + ("\n" if motd else ""), keep="head")


def render_send(value: SendValue, max_bytes: int, session_id: str) -> str:
    if value["kind"] == "background":
        text = (
            f"started background send on {session_id} as {value['jobId']}; collect its output "
            f"with job_output and stop it with job_kill"
        )
        return cap_text(text, max_bytes)
    screen = value.get("screen")
    if screen is not None:
        return cap_text(
            screen["text"],
            max_bytes,
            prefix=_screen_header(screen) + "\n",
            suffix="\n" + status_line(value),
            keep="head",
        )
    viewport = value["viewport"]
    suffix = ("\n" if viewport and not viewport.endswith("\n") else "") + status_line(value)
    if value.get("alternateScreen"):
        suffix += (
            "\n[the program switched to a full-screen display, which a line-mode session "
            "flattens; reopen with terminal_open screen=true to see and drive it]"
        )
    return cap_text(viewport, max_bytes, suffix=suffix, keep="tail")


# Highlights named in a screen's header; the value lists them all.
_HEADER_HIGHLIGHTS = 8


def _screen_header(screen: ScreenValue) -> str:
    """``[screen; cursor at row 3, column 5]``, plus the highlighted runs: focus and
    selection shown only by inverse video or colour are invisible in the text below."""
    row, col = screen["cursor"]
    kind = "full-screen program" if screen["alternate"] else "screen"
    marks = screen.get("highlights") or []
    shown = "".join(
        f"; highlighted {mark['text']!r} at row {mark['row']}, column {mark['col']}"
        for mark in marks[:_HEADER_HIGHLIGHTS]
    )
    if len(marks) > _HEADER_HIGHLIGHTS:
        shown += f"; {len(marks) - _HEADER_HIGHLIGHTS} more highlighted"
    return f"[{kind}; cursor at row {row}, column {col}{shown}]"


def render_screen_read(value: ReadValue, max_bytes: int, session_id: str) -> str:
    screen = value["screen"]
    head = f"[{session_id} screen {value['rows']}x{value['cols']}] {_screen_header(screen)}\n"
    return cap_text(screen["text"], max_bytes, prefix=head, keep="head")


def render_read(value: ReadValue, max_bytes: int, session_id: str) -> str:
    """``[pty-1 lines 101-105 of 1018]`` (1-based, inclusive, as the value says), the text,
    and where the next page starts."""
    begin, end, total = value["lineBegin"], value["lineEnd"], value["totalLines"]
    if end >= begin:
        head = f"[{session_id} lines {begin}-{end} of {total}"
    else:
        head = f"[{session_id} no lines from line {begin}; {total} in total"
    if value["truncated"]:
        head += "; part of the range was trimmed or cut to the size limit"
    head += "]\n"
    more = value.get("more")
    tail = f"\n[more: terminal_read offset={more['offset']}]" if more else ""
    return cap_text(value["text"], max_bytes, prefix=head, suffix=tail, keep="head")


def render_signal(value: SignalValue, sig: str, max_bytes: int) -> str:
    return cap_text(f"delivered {sig} to process group {value['targetPgid']}", max_bytes)


def render_close(value: CloseValue, session_id: str, max_bytes: int) -> str:
    text = f"closed {session_id}" if value["closed"] else f"{session_id} was already being closed"
    return cap_text(text, max_bytes)


def render_list(value: ListValue, max_bytes: int) -> str:
    sessions = value["sessions"]
    if not sessions:
        return "no open terminal sessions"
    lines = []
    for s in sessions:
        name = f" ({s['name']})" if s.get("name") else ""
        # Sessions terminal_open made are the usual case; the others say where they came from.
        opener = s.get("openedBy")
        origin = f" opened by {opener}" if opener and opener != "terminal" else ""
        if s.get("world", "local") != "local":
            origin += f" in world {s['world']}"
        lines.append(
            f"{s['sessionId']}{name} [type: {s['type']}] pid {s['pid']} "
            f"{status_text(s['status'])} cwd {s.get('cwd') or '?'}{origin}"
            + (f" listening {listening_text(s['listening'])}" if s.get("listening") else "")
        )
    return cap_text("\n".join(lines), max_bytes, keep="head")


def with_human(value: SendValue | ReadValue, text: str, max_bytes: int) -> str:
    """``text`` led by a line saying a person held the session, when the value says so."""
    human = value.get("human")
    if human is None:
        return text
    line = (
        f"[a person had control from {human['tookControlAt']} to {human['handedBackAt']}; "
        f"lines {human['lineBegin']}-{human['lineEnd']} are theirs: terminal_read "
        f"offset={human['lineBegin']}]"
    )
    return cap_text(f"{line}\n{text}", max_bytes)
