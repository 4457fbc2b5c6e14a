"""How a plugin's container names its needs, and how the host fills them.

A plugin declares one ``DeclarativeContainer``. Its ``config`` dependency receives the
plugin's validated config; every other ``providers.Dependency`` names a ctx key it
needs, by field name, with the type it accepts::

    class BashContainer(containers.DeclarativeContainer):
        config = providers.Dependency(instance_of=BashConfig)
        subprocess = providers.Dependency(instance_of=TerminalProvider)
        sandbox = optional_dependency(BwrapSandbox)      # None when no plugin provides it
        backend = providers.Singleton(BashBackend, subprocess, ..., sandbox, config)

The host reads the needs from the class (that is what orders plugins), builds the
container with each need wired to the root provider of its key, calls
``check_dependencies()``, and hands the container to the plugin's ``dsh_apply``. A need
is wired to the root provider, not to a resolved object, so ``ctx.override(key, ...)``
reaches every container that names the key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from dependency_injector import containers, errors, providers

from .errors import PluginLoadError

__all__ = [
    "CONFIG_FIELD",
    "build_container",
    "container_needs",
    "kept_resolution",
    "optional_dependency",
]

CONFIG_FIELD = "config"

_T = TypeVar("_T")


class _OptionalMeta(type):
    """``isinstance(x, Optional[T])`` for dependency-injector, which wants a class."""

    _of: type[Any]

    def __instancecheck__(cls, instance: object) -> bool:
        return instance is None or isinstance(instance, cls._of)


def _optional_of(kind: type[Any]) -> type[Any]:
    return _OptionalMeta(f"Optional[{kind.__name__}]", (), {"_of": kind})


def optional_dependency(kind: type[Any]) -> providers.Dependency[Any]:
    """A need the plugin uses when present: it resolves to ``None`` when no plugin provides it.

    ``kind`` may be a runtime-checkable protocol; anything else provided under the key
    fails the type check when resolved, as a required ``Dependency`` does.
    """
    return providers.Dependency(instance_of=_optional_of(kind), default=providers.Object(None))


def container_needs(container: type[Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ctx keys ``container`` needs: ``(required, optional)``, in declaration order."""
    if container is None:
        return (), ()
    required: list[str] = []
    optional: list[str] = []
    for name, provider in container.cls_providers.items():
        if name == CONFIG_FIELD or not isinstance(provider, providers.Dependency):
            continue
        (optional if provider.is_defined else required).append(name)
    return tuple(required), tuple(optional)


def build_container(
    plugin: str,
    container: type[Any],
    config: object,
    provider_of: Callable[[str], providers.Provider[Any] | None],
) -> containers.DeclarativeContainer:
    """Build ``plugin``'s container with its config and each need wired by ``provider_of``.

    ``provider_of(key)`` returns the root provider of a ctx key, or ``None`` when no
    loaded plugin provides it (an optional need then keeps its ``None`` default).
    Raises :class:`PluginLoadError` when a need is left unfilled.
    """
    wired: dict[str, providers.Provider[Any]] = {}
    if isinstance(container.cls_providers.get(CONFIG_FIELD), providers.Dependency):
        wired[CONFIG_FIELD] = providers.Object(config)
    required, optional = container_needs(container)
    for key in (*required, *optional):
        provider = provider_of(key)
        if provider is not None:
            wired[key] = provider
    built: containers.DeclarativeContainer = container(**wired)
    try:
        built.check_dependencies()
    except errors.Error as exc:
        raise PluginLoadError(f"plugin {plugin!r}: {exc}", plugin) from exc
    return built


def kept_resolution(need: Callable[[], _T]) -> Callable[[], _T]:
    """``need()`` for a hot path: a need's service, kept while its overrides stay the same.

    Resolving a need runs through dependency-injector's providers on every call (the type
    check, the host's bookkeeping of resolved services); with the caches cold after a
    terminal's own work, that costs more than the rest of a short tool call. A ctx key
    names one service, so what a need resolves to changes only when an override is added
    to or removed from a provider on its way (``ctx.override``): the returned function
    compares that chain of overriding providers on each call and resolves the need again
    only when it changed. A plain callable (not a provider) is returned as it is.
    """
    if not isinstance(need, providers.Provider):
        return need
    provider: providers.Provider[_T] = need
    kept: list[Any] = []  # [chain of overriding providers, the service]

    def resolve() -> _T:
        chain: list[providers.Provider[Any]] = []
        link = provider.last_overriding
        while link is not None:
            chain.append(link)
            link = link.last_overriding
        if kept and kept[0] == chain:
            service: _T = kept[1]
            return service
        service = provider()
        kept[:] = [chain, service]
        return service

    return resolve
