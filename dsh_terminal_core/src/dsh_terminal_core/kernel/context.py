"""The context: services resolved from dependency-injector containers.

Each plugin declares its own ``DeclarativeContainer`` naming what it needs as
``providers.Dependency`` fields (see :mod:`.wiring`). The host keeps one root container;
every key a plugin provides becomes a provider on it, ``ctx.<key>`` resolves that
provider, and every plugin container that needs the key is wired to it. Tests swap a
service with :meth:`Context.override`, which overrides the root provider, so every
container that needs the key sees the replacement.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from dependency_injector import containers, providers

from .errors import DshError

__all__ = ["Context", "ServiceMissing"]


class ServiceMissing(DshError, AttributeError):
    """``ctx.<key>`` was asked for a key no loaded plugin provides."""

    code = "NO_SERVICE"


class Context:
    """Service locator over the root container; ``ctx.terminals`` and friends."""

    def __init__(self) -> None:
        object.__setattr__(self, "_root", containers.DynamicContainer())
        object.__setattr__(self, "_keys", [])
        object.__setattr__(self, "_resolved", {})
        object.__setattr__(self, "current_plugin", None)
        object.__setattr__(self, "_unloads", {})

    @property
    def container(self) -> containers.DynamicContainer:
        return self._root  # type: ignore[no-any-return]

    def provide(self, key: str, provider: providers.Provider[Any]) -> None:
        """Make ``ctx.<key>`` resolve ``provider``. A key is provided once."""
        if key in self._keys:
            raise DshError(f"ctx key {key!r} is already provided", "DUPLICATE_SERVICE")
        # Resolution passes through _track so the host can dispose what was created, in
        # creation order, without reaching into provider internals.
        setattr(self._root, key, providers.Callable(self._track, key, provider))
        self._keys.append(key)

    def provider(self, key: str) -> providers.Provider[Any]:
        if key not in self._keys:
            raise ServiceMissing(f"no loaded plugin provides {key!r}")
        return getattr(self._root, key)  # type: ignore[no-any-return]

    def has(self, key: str) -> bool:
        return key in self._keys

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_"):
            raise AttributeError(key)
        return self.provider(key)()

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "current_plugin":
            object.__setattr__(self, key, value)
            return
        raise AttributeError("ctx services are provided through ctx.provide(), not assigned")

    def on_unload(self, undo: Callable[[], object]) -> None:
        """Run ``undo`` when the plugin now applying is unloaded or reloaded.

        Plugins pass the disposers of what they registered (a backend, a prompt section)
        so a reload replaces their contributions without touching what others own.
        Tools need no call: the harness removes a plugin's tools by the stamp they carry.
        """
        plugin = self.current_plugin
        if plugin is None:
            raise DshError("on_unload() is only valid while a plugin applies", "INVALID_ARGUMENT")
        self._unloads.setdefault(plugin, []).append(undo)

    def run_unloads(self, plugin: str) -> None:
        """Undo what ``plugin`` registered through :meth:`on_unload`, newest first."""
        for undo in reversed(self._unloads.pop(plugin, [])):
            undo()

    @contextlib.contextmanager
    def override(self, key: str, service: object) -> Iterator[None]:
        """Resolve ``ctx.<key>`` (and every injection of it) to ``service`` inside the block."""
        with self.provider(key).override(providers.Object(service)):
            yield

    def resolved_services(self) -> list[tuple[str, object]]:
        """Services instantiated so far, in the order they were first resolved."""
        return list(self._resolved.items())

    def _track(self, key: str, instance: object) -> object:
        if key not in self._resolved:
            self._resolved[key] = instance
        return instance


async def dispose_service(service: object) -> None:
    """Dispose a service through whichever of ``dispose``/``aclose``/``close`` it has."""
    for name in ("dispose", "aclose", "close"):
        method = getattr(service, name, None)
        if callable(method):
            outcome = method()
            if inspect.isawaitable(outcome):
                await outcome
            return
