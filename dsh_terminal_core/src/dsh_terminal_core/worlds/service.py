"""``ctx.worlds``: the configured worlds, each reached through one link, opened on first use.

The registry asks a world for a backend of a type (:meth:`WorldsService.backend`); the
first session opened in a world starts its command and shakes hands, and every later
session shares that link. A world whose agent ended is started afresh by the next open
(its old sessions already read ``exited``, naming why); it is a new world, with a new
``worldId``, never taken for the old one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from ..kernel.errors import ErrorCode, TerminalError
from ..registry.types import TerminalBackend
from .backend import WorldBackend
from .config import LOCAL, WorldEntry, WorldsConfig
from .link import WorldLink, connect

__all__ = ["WorldsService"]


class WorldsService:
    """Links to the configured worlds, and a backend per (world, type)."""

    def __init__(
        self, config: WorldsConfig, sandbox_mode: Callable[[Any], str | None] | None = None
    ) -> None:
        self.config = config
        self._sandbox_mode = sandbox_mode or (lambda _owner: None)
        self._links: dict[str, WorldLink] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._closed = False

    @property
    def default(self) -> str:
        return self.config.default

    def names(self) -> list[str]:
        return [LOCAL, *self.config.worlds]

    def entry(self, world: str) -> WorldEntry:
        found = self.config.worlds.get(world)
        if found is None:
            raise TerminalError(
                f"no world named {world!r} (configured: {', '.join(self.names())})",
                ErrorCode.INVALID_ARGUMENT,
            )
        return found

    def backend(self, world: str, type: str) -> TerminalBackend:
        """The backend for ``type`` in ``world`` (the world says at open if it lacks it)."""
        self.entry(world)
        return WorldBackend(world, type, lambda: self.link(world), self._sandbox_mode)

    async def link(self, world: str) -> WorldLink:
        """The world's live link, started now if there is none or the last one ended."""
        if self._closed:
            raise TerminalError("the worlds service is closed", ErrorCode.SERVICE_DISPOSING)
        entry = self.entry(world)
        lock = self._connecting.setdefault(world, asyncio.Lock())
        async with lock:
            current = self._links.get(world)
            if current is not None and current.lost is None:
                return current
            if current is not None:
                await current.aclose()  # its agent is gone: reap the command, free its pipes
            assert entry.command is not None  # socket worlds are refused by the config
            link = await connect(world, entry.command, client={"key": entry.key})
            self._links[world] = link
            return link

    def world_id(self, world: str) -> dict[str, Any] | None:
        link = self._links.get(world)
        return dict(link.world_id) if link is not None else None

    async def aclose(self) -> None:
        """End every link; each world's agent closes its sessions and exits."""
        self._closed = True
        links, self._links = list(self._links.values()), {}
        for link in links:
            with contextlib.suppress(Exception):
                await link.aclose()
