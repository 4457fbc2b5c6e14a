"""Plugin metadata, discovery, config validation and load order."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import pluggy

from . import hookspecs
from .errors import ConfigError, PluginLoadError

__all__ = [
    "ENTRY_POINT_GROUP",
    "LoadedPlugin",
    "PluginInfo",
    "discover",
    "load_plugins",
    "order_plugins",
    "validate_config",
]

ENTRY_POINT_GROUP = "dsh.plugins"

# Where a missing key usually comes from, so the startup error can say what to install.
KNOWN_PROVIDERS: dict[str, str] = {
    "subprocess": "dsh-terminal-core",
    "terminals": "dsh-terminal-core",
    "sandbox_policy": "dsh-terminal-core",
    "sandbox": "dsh-terminal-core",
    "jobs": "dsh-terminal-core",
    "pty": "dsh-pty-session",
}

# Keys the harness itself provides; plugins may inject them without a provider plugin.
BUILTIN_KEYS: tuple[str, ...] = ("tools", "system_prompt")


def _keys(keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(keys)


@attrs.frozen(kw_only=True)
class PluginInfo:
    """What a plugin says about itself through ``dsh_plugin_info``.

    ``provides`` are ctx keys this plugin's ``container`` has providers for; ``inject``
    are keys it cannot start without; ``optional_inject`` are keys it uses when present.
    """

    name: str
    description: str = ""
    provides: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    inject: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    optional_inject: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    config: type[Any] | None = None
    container: type[Any] | None = None


@attrs.frozen(kw_only=True)
class LoadedPlugin:
    """A plugin object with its metadata and where it came from."""

    info: PluginInfo
    module: object = attrs.field(eq=False)
    source: str

    @property
    def name(self) -> str:
        return self.info.name


def _plugin_manager() -> pluggy.PluginManager:
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def _describe(plugin: object, source: str, manager: pluggy.PluginManager) -> LoadedPlugin:
    try:
        manager.register(plugin, name=f"{source}:{id(plugin)}")
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        raise PluginLoadError(f"plugin from {source} is invalid: {exc}") from exc
    impls = [i for i in manager.hook.dsh_plugin_info.get_hookimpls() if i.plugin is plugin]
    if not impls:
        raise PluginLoadError(f"plugin from {source} does not implement dsh_plugin_info")
    info = impls[0].function()
    if not isinstance(info, PluginInfo):
        raise PluginLoadError(f"plugin from {source}: dsh_plugin_info must return PluginInfo")
    return LoadedPlugin(info=info, module=plugin, source=source)


def discover(group: str = ENTRY_POINT_GROUP) -> list[LoadedPlugin]:
    """Load every plugin registered under the entry-point ``group``."""
    manager = _plugin_manager()
    loaded: list[LoadedPlugin] = []
    for entry_point in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
        dist = entry_point.dist.name if entry_point.dist is not None else "?"
        source = f"entry point {entry_point.name!r} ({dist})"
        try:
            module = entry_point.load()
        except Exception as exc:
            raise PluginLoadError(
                f"cannot import plugin {entry_point.name!r} from {dist} "
                f"({entry_point.value}): {exc}",
                entry_point.name,
            ) from exc
        plugin = _describe(module, source, manager)
        if plugin.name != entry_point.name:
            raise PluginLoadError(
                f"entry point {entry_point.name!r} ({dist}) loads a plugin named "
                f"{plugin.name!r}; the names must match because config sections use them",
                entry_point.name,
            )
        loaded.append(plugin)
    return loaded


def load_plugins(
    plugins: Sequence[object] | None, group: str = ENTRY_POINT_GROUP
) -> list[LoadedPlugin]:
    """Discover plugins (``plugins=None``) or describe an explicit list of plugin objects."""
    if plugins is None:
        return discover(group)
    manager = _plugin_manager()
    return [
        _describe(p, f"explicit plugin {getattr(p, '__name__', p)!r}", manager) for p in plugins
    ]


def order_plugins(plugins: Iterable[LoadedPlugin]) -> list[LoadedPlugin]:
    """Order plugins so each comes after the providers of everything it injects.

    Raises :class:`PluginLoadError` for duplicate names, a key provided twice, an
    injected key nobody provides, or a dependency cycle. Ties keep discovery order.
    """
    plugins = list(plugins)
    by_name: dict[str, LoadedPlugin] = {}
    provider_of: dict[str, str] = {}
    for plugin in plugins:
        if plugin.name in by_name:
            raise PluginLoadError(
                f"two plugins are named {plugin.name!r} ({by_name[plugin.name].source} and "
                f"{plugin.source})",
                plugin.name,
            )
        by_name[plugin.name] = plugin
        for key in plugin.info.provides:
            if key in BUILTIN_KEYS:
                raise PluginLoadError(
                    f"plugin {plugin.name!r} provides {key!r}, which the harness itself provides",
                    plugin.name,
                )
            if key in provider_of:
                raise PluginLoadError(
                    f"plugins {provider_of[key]!r} and {plugin.name!r} both provide {key!r}",
                    plugin.name,
                )
            provider_of[key] = plugin.name

    needs: dict[str, list[str]] = {}
    for plugin in plugins:
        deps: list[str] = []
        for key in plugin.info.inject:
            if key in BUILTIN_KEYS:
                continue
            if key not in provider_of:
                hint = KNOWN_PROVIDERS.get(key)
                advice = f"; install {hint}" if hint else ""
                raise PluginLoadError(
                    f"plugin {plugin.name!r} injects {key!r} but no loaded plugin provides it"
                    f"{advice}",
                    plugin.name,
                )
            deps.append(provider_of[key])
        for key in plugin.info.optional_inject:
            if key in provider_of:
                deps.append(provider_of[key])
        needs[plugin.name] = [d for d in deps if d != plugin.name]

    ordered: list[LoadedPlugin] = []
    state: dict[str, str] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == "done":
            return
        if state.get(name) == "visiting":
            cycle = [*path[path.index(name) :], name]
            raise PluginLoadError(
                "plugin dependency cycle: " + " -> ".join(repr(n) for n in cycle), name
            )
        state[name] = "visiting"
        for dep in needs[name]:
            visit(dep, [*path, name])
        state[name] = "done"
        ordered.append(by_name[name])

    for plugin in plugins:
        visit(plugin.name, [])
    return ordered


def validate_config(plugin: LoadedPlugin, section: Mapping[str, Any] | None) -> object:
    """Build the plugin's ``Config`` from its own section; reject unknown keys and bad values."""
    config_cls = plugin.info.config
    section = dict(section or {})
    if config_cls is None:
        if section:
            raise ConfigError(
                f"plugin {plugin.name!r} takes no config, got keys {sorted(section)}",
                plugin.name,
                sorted(section)[0],
            )
        return None
    allowed = {a.name: a for a in attrs.fields(config_cls)}
    for key in section:
        if key not in allowed:
            raise ConfigError(
                f"plugin {plugin.name!r} has no config key {key!r}; known keys: "
                f"{', '.join(sorted(allowed)) or '(none)'}",
                plugin.name,
                key,
            )
    try:
        return config_cls(**section)
    except (TypeError, ValueError) as exc:
        bad_key = next((k for k in section if k in str(exc)), None)
        raise ConfigError(
            f"plugin {plugin.name!r} has an invalid config value: {exc}", plugin.name, bad_key
        ) from exc
