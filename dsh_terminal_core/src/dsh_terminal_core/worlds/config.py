"""The ``worlds`` config section (SPEC §21): named worlds and the default one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["LOCAL", "WorldEntry", "WorldsConfig"]

#: The built-in world: the in-process provider, every shell a child of this host.
LOCAL = "local"


def _command(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if (
        not isinstance(value, (list, tuple))
        or not value
        or not all(isinstance(arg, str) and arg for arg in value)
    ):
        raise ValueError(f"{attribute.name} must be a non-empty list of non-empty strings")


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen(kw_only=True)
class WorldEntry:
    """One world: the command whose stdio speaks the protocol (or a daemon's socket)."""

    command: tuple[str, ...] | None = attrs.field(
        default=None, converter=_as_tuple, validator=_command
    )
    socket: str | None = None
    key: str | None = None
    lease_s: int = 600
    persist: bool = False
    #: The harness pings after this long (None: the protocol's 10 s); a world silent for
    #: three of them is gone, so a frozen one (a paused container) settles its sends
    #: within 4 × this.
    heartbeat_s: float | None = None
    #: A command printing the world's state (``podman inspect -f ... box``), run when its
    #: daemon is found gone and quoted in the reason its sessions end with.
    state: tuple[str, ...] | None = attrs.field(
        default=None, converter=_as_tuple, validator=_command
    )

    def __attrs_post_init__(self) -> None:
        if (self.command is None) == (self.socket is None):
            raise ValueError("a world needs exactly one of command and socket")
        if self.lease_s < 1:
            raise ValueError("lease_s must be at least 1")
        if self.heartbeat_s is not None and not 0.05 <= self.heartbeat_s <= 3600:
            raise ValueError("heartbeat_s must be between 0.05 and 3600")


def _worlds(value: object) -> dict[str, WorldEntry]:
    if isinstance(value, Mapping):
        built: dict[str, WorldEntry] = {}
        for name, entry in value.items():
            if not isinstance(name, str) or not name or name == LOCAL:
                raise ValueError(f"world name {name!r} is empty or reserved")
            if isinstance(entry, WorldEntry):
                built[name] = entry
            elif isinstance(entry, Mapping):
                try:
                    built[name] = WorldEntry(**entry)
                except TypeError as exc:
                    raise ValueError(f"world {name!r}: {exc}") from None
            else:
                raise ValueError(f"world {name!r} must be an object")
        return built
    raise ValueError("worlds must be an object of named worlds")


@attrs.frozen(kw_only=True)
class WorldsConfig:
    """``{"worlds": {NAME: {"command": [...]}}, "default": NAME}``; ``local`` is built in."""

    worlds: dict[str, WorldEntry] = attrs.field(factory=dict, converter=_worlds)
    default: str = LOCAL

    def __attrs_post_init__(self) -> None:
        if self.default != LOCAL and self.default not in self.worlds:
            raise ValueError(
                f"default world {self.default!r} is not configured "
                f"(configured: {', '.join([LOCAL, *self.worlds])})"
            )
