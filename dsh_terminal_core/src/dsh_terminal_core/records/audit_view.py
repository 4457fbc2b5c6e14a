"""Reading an audit log back: the lines that match, as a table (``dsh-terminal audit``)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

__all__ = ["AuditRead", "audit_table", "parse_since", "read_audit"]

_ARGS_SHOWN = 60


@attrs.frozen(kw_only=True)
class AuditRead:
    """The entries that matched, in file order, and how many lines were not JSON objects."""

    entries: list[dict[str, Any]]
    unreadable: int


def parse_since(text: str) -> datetime.datetime:
    """An ISO 8601 time; one without a zone is UTC. ``ValueError`` when it is not one."""
    moment = datetime.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment


def read_audit(
    lines: Iterable[str],
    *,
    agent: str | None = None,
    session: str | None = None,
    since: datetime.datetime | None = None,
) -> AuditRead:
    """The entries of ``lines`` by ``agent``, about ``session``, at or after ``since``."""
    entries: list[dict[str, Any]] = []
    unreadable = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            unreadable += 1
            continue
        if not isinstance(entry, dict):
            unreadable += 1
            continue
        if agent is not None and entry.get("agent") != agent:
            continue
        if session is not None and entry.get("sessionId") != session:
            continue
        if since is not None and not _at_or_after(entry.get("ts"), since):
            continue
        entries.append(entry)
    return AuditRead(entries=entries, unreadable=unreadable)


def _at_or_after(ts: object, since: datetime.datetime) -> bool:
    if not isinstance(ts, str):
        return False
    try:
        return parse_since(ts) >= since
    except ValueError:
        return False


def audit_table(entries: Iterable[Mapping[str, Any]]) -> str:
    """One row per entry: time, agent, tool, session, outcome, milliseconds, arguments."""
    rows = [["TIME", "AGENT", "TOOL", "SESSION", "OUTCOME", "MS", "ARGS"]]
    for entry in entries:
        agent = str(entry.get("agent", ""))
        if entry.get("identity") not in (None, agent):
            agent += f" ({entry['identity']})"
        rows.append(
            [
                str(entry.get("ts", "")),
                agent,
                str(entry.get("tool", "")),
                str(entry.get("sessionId", "-")),
                _outcome(entry.get("outcome")),
                _ms(entry.get("durationMs")),
                _args(entry.get("args")),
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _outcome(outcome: object) -> str:
    if not isinstance(outcome, Mapping):
        return "?"
    if outcome.get("isError"):
        return f"error {outcome.get('code', '?')}"
    shown = ["ok"]
    if outcome.get("waitReason") is not None:
        shown.append(str(outcome["waitReason"]))
    if outcome.get("exitCode") is not None:
        shown.append(f"exit={outcome['exitCode']}")
    return " ".join(shown)


def _ms(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "?"


def _args(args: object) -> str:
    if isinstance(args, Mapping):
        args = {k: v for k, v in args.items() if k != "sessionId"}
    text = json.dumps(args, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _ARGS_SHOWN else text[: _ARGS_SHOWN - 1] + "…"
