"""The operator's links (SPEC §31): a session's recording, and an identity's overview.

Like a watch link each is a capability — ``token_urlsafe(32)``, compared in constant
time, answered 404 once expired or unknown — served under the same ``/watch/<token>``
prefix, so the MCP HTTP server routes them with no change and a guess cannot tell one
kind of link from another. They are given to the operator (the ``dsh-terminal``
command line, the host API ``ctx.human``), never by a model-facing tool: an overview
shows every session of an identity and hands out control links to them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

from ..kernel.agents import Agent

__all__ = ["WATCH_PREFIX", "OperatorLink", "OperatorLinks", "OverviewLink", "RecordingLink"]

WATCH_PREFIX = "/watch/"
"""The path every page link lives under: watch links and the operator's alike."""


class OperatorLink:
    """A capability link of the operator's; ``expires_at`` None: until the server stops."""

    def __init__(self, base_url: str, ttl_s: float | None) -> None:
        self.token = secrets.token_urlsafe(32)
        self.url = f"{base_url.rstrip('/')}{WATCH_PREFIX}{self.token}"
        self.created_at = time.time()
        self.expires_at = None if ttl_s is None else self.created_at + ttl_s

    @property
    def live(self) -> bool:
        return self.expires_at is None or time.time() < self.expires_at


class RecordingLink(OperatorLink):
    """Plays ``path`` (an asciicast v2 file); ``audit`` is the audit log to link from."""

    def __init__(
        self, base_url: str, ttl_s: float | None, path: str, audit: str | None = None
    ) -> None:
        super().__init__(base_url, ttl_s)
        self.path = path
        self.audit = audit


class OverviewLink(OperatorLink):
    """Every live session of one identity; ``resolve`` gives its agent now (None: none).

    An identity's agent can change (the HTTP server reaps an idle one and makes a new
    one when it reconnects), so the link holds the way to find it, not the agent.
    """

    def __init__(
        self,
        base_url: str,
        ttl_s: float | None,
        label: str,
        resolve: Callable[[], Agent | None],
    ) -> None:
        super().__init__(base_url, ttl_s)
        self.label = label
        self.resolve = resolve


class OperatorLinks:
    """The live operator links, by token."""

    def __init__(self) -> None:
        self._links: dict[str, OperatorLink] = {}

    def add(self, link: OperatorLink) -> None:
        self._links[link.token] = link

    def find(self, token: str) -> OperatorLink | None:
        """The live link with ``token``, or None; an expired one is forgotten."""
        wanted = token.encode("utf-8", "replace")
        found = None
        for candidate, link in self._links.items():
            if secrets.compare_digest(candidate.encode(), wanted):
                found = link
        if found is not None and not found.live:
            del self._links[found.token]
            return None
        return found

    def clear(self) -> None:
        self._links.clear()
