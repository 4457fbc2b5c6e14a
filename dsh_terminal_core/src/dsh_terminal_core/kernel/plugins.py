"""Plugin metadata, the plugin manager, discovery, config validation and load order.

The host owns one :class:`pluggy.PluginManager` (see :func:`plugin_manager`). Every
plugin is registered on it under its name; hooks are found by their marker and spec
name (``@hookimpl(specname="dsh_apply")`` on any function works) and called through it.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import pluggy

from . import hookspecs
from .errors import ConfigError, PluginLoadError
from .wiring import container_needs

__all__ = [
    "ENTRY_POINT_GROUP",
    "LoadedPlugin",
    "PluginInfo",
    "call_plugin_hook",
    "discover",
    "load_plugins",
    "order_plugins",
    "plugin_manager",
    "register_plugin",
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
    "secrets": "dsh-terminal-core",
    "pty": "dsh-pty-session",
}

# Keys the harness itself provides; plugins may inject them without a provider plugin.
BUILTIN_KEYS: tuple[str, ...] = ("tools", "system_prompt", "plugin_manager")


def _keys(keys: Iterable[str]) -> tuple[str, ...]:
    return tuple(keys)


@attrs.frozen(kw_only=True)
class PluginInfo:
    """What a plugin says about itself through ``dsh_plugin_info``.

    ``provides`` are ctx keys this plugin's ``container`` has providers for. What it
    needs is read from the container: each ``providers.Dependency`` field other than
    ``config`` names a ctx key, required unless it has a default (see
    :func:`dsh_terminal_core.wiring.optional_dependency`). ``inject`` and
    ``optional_inject`` are those keys; a plugin without a container may list keys it
    must load after there, but never needs to repeat what its container declares.
    """

    name: str
    description: str = ""
    provides: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    config: type[Any] | None = None
    container: type[Any] | None = None
    inject: tuple[str, ...] = attrs.field(default=(), converter=_keys)
    optional_inject: tuple[str, ...] = attrs.field(default=(), converter=_keys)

    def __attrs_post_init__(self) -> None:
        required, optional = container_needs(self.container)
        inject = tuple(dict.fromkeys((*self.inject, *required)))
        optional = tuple(k for k in dict.fromkeys((*self.optional_inject, *optional)))
        object.__setattr__(self, "inject", inject)
        object.__setattr__(self, "optional_inject", tuple(k for k in optional if k not in inject))


@attrs.frozen(kw_only=True)
class LoadedPlugin:
    """A plugin object with its metadata and where it came from."""

    info: PluginInfo
    module: object = attrs.field(eq=False)
    source: str

    @property
    def name(self) -> str:
        return self.info.name


def plugin_manager() -> pluggy.PluginManager:
    """A plugin manager that knows the dsh hook specs."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    return manager


def _spec_names(manager: pluggy.PluginManager) -> set[str]:
    return {
        name
        for name, caller in vars(manager.hook).items()
        if isinstance(caller, pluggy.HookCaller) and caller.spec is not None
    }


def _unmarked_hooks(plugin: object, manager: pluggy.PluginManager) -> list[str]:
    """Spec-named callables on ``plugin`` that carry no ``hookimpl`` marker."""
    return sorted(
        name
        for name in _spec_names(manager)
        if callable(getattr(plugin, name, None))
        and manager.parse_hookimpl_opts(plugin, name) is None
    )


def call_plugin_hook(
    manager: pluggy.PluginManager, plugin: object, hook: str, **kwargs: Any
) -> list[Any]:
    """Call ``plugin``'s own implementations of ``hook``; other plugins' are not called.

    Each implementation receives the arguments it names (pluggy lets an implementation
    take a subset of the spec's), so ``dsh_apply(ctx, config)`` and
    ``dsh_apply(ctx, config, container)`` both work.
    """
    caller: pluggy.HookCaller = getattr(manager.hook, hook)
    return [
        impl.function(*(kwargs[arg] for arg in impl.argnames))
        for impl in caller.get_hookimpls()
        if impl.plugin is plugin
    ]


def register_plugin(
    manager: pluggy.PluginManager, plugin: object, source: str, name: str | None = None
) -> LoadedPlugin:
    """Register ``plugin`` on ``manager`` under its own name and describe it.

    Validation happens here, at registration: a marked hook with no matching spec, an
    implementation asking for an argument its spec does not pass, a spec-named function
    without the ``hookimpl`` marker, a missing or wrong ``dsh_plugin_info``, and a second
    plugin of the same name all raise :class:`PluginLoadError`; nothing stays registered.
    ``name``, when given, is the name the plugin must report (its entry-point name).
    """
    if manager.is_registered(plugin):
        raise PluginLoadError(
            f"{source} is already loaded as {manager.get_name(plugin)!r}", manager.get_name(plugin)
        )
    unmarked = _unmarked_hooks(plugin, manager)
    if unmarked:
        raise PluginLoadError(
            f"plugin from {source} defines {', '.join(unmarked)} without the hookimpl marker; "
            "decorate it with @dsh_terminal_core.hookimpl or the harness never calls it",
            name,
        )
    provisional = f"{source}#{id(plugin)}"
    try:
        manager.register(plugin, name=provisional)
    except (pluggy.PluginValidationError, ValueError) as exc:
        raise PluginLoadError(f"plugin from {source} is invalid: {exc}", name) from exc
    try:
        manager.check_pending()
        info = _describe(manager, plugin, source)
        if name is not None and info.name != name:
            raise PluginLoadError(
                f"{source} loads a plugin named {info.name!r}; the names must match because "
                "config sections use them",
                name,
            )
        if manager.has_plugin(info.name):
            raise PluginLoadError(
                f"two plugins are named {info.name!r} ({source} and one loaded before it)",
                info.name,
            )
    except pluggy.PluginValidationError as exc:
        manager.unregister(plugin)
        raise PluginLoadError(f"plugin from {source} is invalid: {exc}", name) from exc
    except BaseException:
        manager.unregister(plugin)
        raise
    manager.unregister(plugin)
    manager.register(plugin, name=info.name)
    return LoadedPlugin(info=info, module=plugin, source=source)


def _describe(manager: pluggy.PluginManager, plugin: object, source: str) -> PluginInfo:
    infos = call_plugin_hook(manager, plugin, "dsh_plugin_info")
    if not infos:
        raise PluginLoadError(f"plugin from {source} does not implement dsh_plugin_info")
    info = infos[0]
    if not isinstance(info, PluginInfo):
        raise PluginLoadError(f"plugin from {source}: dsh_plugin_info must return PluginInfo")
    return info


def discover(manager: pluggy.PluginManager, group: str = ENTRY_POINT_GROUP) -> list[LoadedPlugin]:
    """Register every plugin of the entry-point ``group`` on ``manager``."""
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
        loaded.append(register_plugin(manager, module, source, entry_point.name))
    return loaded


def load_plugins(
    manager: pluggy.PluginManager,
    plugins: Sequence[object] | None,
    group: str = ENTRY_POINT_GROUP,
) -> list[LoadedPlugin]:
    """Register discovered plugins (``plugins=None``) or an explicit list on ``manager``."""
    if plugins is None:
        return discover(manager, group)
    return [
        register_plugin(manager, plugin, f"explicit plugin {getattr(plugin, '__name__', plugin)!r}")
        for plugin in plugins
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
