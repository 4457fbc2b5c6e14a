"""Which agent notices wake an MCP client, and what the client is sent for each (§19.5).

This is the one place that maps a :class:`~.agents.Notice` kind onto the ``event`` a
client sees in the ``data`` of a ``notifications/message`` (level ``info``, logger
``dsh-terminal``)::

    {"event": "job_done", "sessionId": "pty-1", "jobId": "job-3", "summary": "..."}

``summary`` is the notice's text, the same words the ``[notice]`` line of the next
result carries. A kind not listed in :data:`EVENTS` is not announced: its notice still
reaches the next result, but no client is woken for it. Nothing here knows the SDK, so
the mapping is testable and shared by every transport.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from ..kernel.agents import Notice

__all__ = ["EVENTS", "LEVEL", "LOGGER", "delivered_at", "notification_data"]

LOGGER: Final = "dsh-terminal"
LEVEL: Final = "info"

EVENTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        # JobService's notice when a background job ends, however it ends.
        "job_finished": "job_done",
        # A background ``waitFor`` saw its line (data: sessionId, jobId).
        "matched": "matched",
        # A person took the terminal over, or handed it back (§22; data: sessionId).
        "human_control": "human_control",
        "human_returned": "human_returned",
        # A plugin's own word for the client, e.g. a step of a long tool (data: free).
        "message": "message",
        # The kernel enforced an owner's cgroup limit in a session (§29; data: sessionId,
        # limit "memory" or "pids", count).
        "limit_reached": "limit_reached",
    }
)
"""Notice kind -> the ``event`` a client is told; every other kind stays unannounced."""

# RFC 5424 severities, ascending, as MCP's ``LoggingLevel`` names them.
_SEVERITY: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


def notification_data(notice: Notice) -> dict[str, Any] | None:
    """The ``data`` of the logging notification for ``notice``; ``None`` when not announced.

    ``sessionId`` is always present (``null`` for a notice about no terminal session);
    ``jobId`` only when the notice names a job.
    """
    event = EVENTS.get(notice.kind)
    if event is None:
        return None
    session_id = notice.data.get("sessionId")
    data: dict[str, Any] = {
        "event": event,
        "sessionId": None if session_id is None else str(session_id),
    }
    job_id = notice.data.get("jobId")
    if job_id is not None:
        data["jobId"] = str(job_id)
    data["summary"] = notice.text
    return data


def delivered_at(level: str | None) -> bool:
    """Whether a client that asked for ``level`` and above (``None``: never asked) gets these.

    A client that never called ``logging/setLevel`` gets them: waking it is the point,
    and MCP leaves the default to the server. An unknown level reads as "not asked".
    """
    if level is None or level not in _SEVERITY:
        return True
    return _SEVERITY.index(level) <= _SEVERITY.index(LEVEL)
