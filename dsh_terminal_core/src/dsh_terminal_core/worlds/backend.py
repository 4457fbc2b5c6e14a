"""One terminal type of one world, as the registry sees a backend.

``spawn`` sends ``open`` over the world's link (starting the link on first use) with the
owner's sandbox *mode* as the harness's policy resolves it; the world enforces it with
its own workspace and its own bubblewrap. The answer becomes a :class:`WorldSession`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..registry.types import BackendSpawnContext
from .link import WorldLink
from .messages import status_from_wire
from .session import WorldSession

__all__ = ["WorldBackend", "session_from_row"]

# The types a world's shell backends register (bash, zsh, fish): interactive shells,
# which run ``export NAME=value`` lines.
_SHELL_TYPES = frozenset({"shell", "zsh", "fish"})


class WorldBackend:
    """``type`` in world ``world``; ``link`` gives the live link (connecting if needed)."""

    def __init__(
        self,
        world: str,
        type: str,
        link: Callable[[], Awaitable[WorldLink]],
        sandbox_mode: Callable[[Any], str | None],
        *,
        lease_s: float | None = None,
    ) -> None:
        self.world = world
        self._type = type
        self._link = link
        self._sandbox_mode = sandbox_mode
        self._lease_s = lease_s
        #: Told of every session opened, so a daemon's can be resumed after a lost link.
        self.on_session: Callable[[Any, WorldSession], None] | None = None

    @property
    def type(self) -> str:
        return self._type

    @property
    def exports_env(self) -> bool:
        return self._type in _SHELL_TYPES

    async def spawn(self, context: BackendSpawnContext) -> WorldSession:
        link = await self._link()
        header: dict[str, Any] = {
            "t": "open",
            "agentId": context.owner.id,
            "type": self._type,
            "cwd": context.cwd,
            "screen": context.screen,
            "rows": context.rows,
            "cols": context.cols,
            "harnessSid": context.session_id,
            "name": context.name,
            "sandbox": self._sandbox_mode(context.owner),
            "leaseS": self._lease_s,
        }
        opened = await link.call(header)
        # A daemon (behind a socket or a relay) keeps the session across a lost link.
        capabilities = link.hello.get("capabilities") or {}
        resumable = bool(capabilities.get("daemon")) if isinstance(capabilities, dict) else False
        session = session_from_row(link, self.world, opened, resumable=resumable)
        if self.on_session is not None:
            self.on_session(context.owner, session)
        return session


def session_from_row(
    link: WorldLink, world: str, row: dict[str, Any], *, resumable: bool = False
) -> WorldSession:
    """The session an ``open`` or ``adopt`` answer describes, attached to ``link``."""
    session = WorldSession(
        link,
        world,
        sid=str(row["sid"]),
        pid=int(row.get("pid") or 0),
        motd=str(row.get("motd") or ""),
        status=status_from_wire(row.get("status")),
        bounds=dict(row.get("bounds") or {}),
        screen=bool(row.get("screen")),
        resumable=resumable,
    )
    in_flight = row.get("inFlight")
    if isinstance(in_flight, str):
        session.adopt_send(in_flight)
    return session
