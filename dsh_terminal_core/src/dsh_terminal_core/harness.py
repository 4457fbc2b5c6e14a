"""The harness: loads plugins, composes their containers, owns agents and tools.

This is the public entry point for tests, the CLI, the MCP server and outside hosts::

    async with Harness(plugins=None, config={...}) as h:
        agent = h.create_agent("agent-1")
        result = await h.call_tool(agent, "terminal_open", {"type": "shell"})
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import attrs
from dependency_injector import providers

from .agents import Agent
from .cancel import Cancellation
from .context import Context, dispose_service
from .errors import ConfigError, DisposeError, DshError
from .plugins import ENTRY_POINT_GROUP, LoadedPlugin, load_plugins, order_plugins, validate_config
from .prompt import SystemPrompt
from .tools import ToolExec, ToolRegistry, ToolResult

__all__ = ["Harness"]


class Harness:
    """A running set of plugins with their services, agents and tools."""

    def __init__(
        self,
        plugins: Sequence[object] | None = None,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        group: str = ENTRY_POINT_GROUP,
    ) -> None:
        self._plugin_objects = plugins
        self._config = dict(config or {})
        self._group = group
        self.ctx = Context()
        self._plugins: list[LoadedPlugin] = []
        self._agents: list[Agent] = []
        self._started = False
        self._closed = False

    @property
    def plugins(self) -> list[LoadedPlugin]:
        """Loaded plugins in load order."""
        return list(self._plugins)

    async def __aenter__(self) -> Harness:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Load, validate and apply every plugin; fails before applying anything on error."""
        if self._started:
            return
        loaded = order_plugins(load_plugins(self._plugin_objects, self._group))
        known = {p.name for p in loaded}
        for section in self._config:
            if section not in known:
                raise ConfigError(
                    f"config section {section!r} matches no loaded plugin "
                    f"(loaded: {', '.join(sorted(known)) or 'none'})",
                    section,
                )
        configs = {p.name: validate_config(p, self._config.get(p.name)) for p in loaded}

        ctx = self.ctx
        ctx.provide("tools", providers.Singleton(ToolRegistry, lambda: ctx.current_plugin))
        ctx.provide("system_prompt", providers.Singleton(SystemPrompt))
        for plugin in loaded:
            self._provide(plugin, configs[plugin.name])
        self._plugins = loaded
        self._started = True
        try:
            for plugin in loaded:
                ctx.current_plugin = plugin.name
                try:
                    for impl in _hookimpls(plugin, "dsh_apply"):
                        impl(ctx=ctx, config=configs[plugin.name])
                except DshError:
                    raise
                except Exception as exc:
                    raise DshError(
                        f"plugin {plugin.name!r} failed to apply: {type(exc).__name__}: {exc}",
                        "PLUGIN_LOAD",
                    ) from exc
        except BaseException:
            await self.aclose()
            raise
        finally:
            ctx.current_plugin = None

    def _provide(self, plugin: LoadedPlugin, config: object) -> None:
        info = plugin.info
        if not info.provides:
            return
        if info.container is None:
            raise DshError(
                f"plugin {plugin.name!r} provides {list(info.provides)} but has no container",
                "PLUGIN_LOAD",
            )
        deps = self.ctx.dependencies(
            [k for k in info.inject if self.ctx.has(k)], info.optional_inject
        )
        container = info.container(config=providers.Object(config), deps=deps)
        for key in info.provides:
            provider = getattr(container, key, None)
            if not isinstance(provider, providers.Provider):
                raise DshError(
                    f"plugin {plugin.name!r} says it provides {key!r} but its container "
                    f"{info.container.__name__} has no provider of that name",
                    "PLUGIN_LOAD",
                )
            self.ctx.provide(key, provider)

    async def reload_plugin(
        self, name: str, config: Mapping[str, Any] | None = None, *, reimport: bool = False
    ) -> None:
        """Replace a loaded plugin's contributions, optionally with a new config section.

        Its tools, prompt sections and backends are unregistered and the plugin applies
        again. Sessions live on: they belong to their owners and the registry, not to the
        plugin that created them, so a backend or tool reload never closes a terminal.
        Plugins that provide ctx keys cannot be reloaded (services others hold would go
        stale): that raises ``RELOAD_UNSUPPORTED``. ``reimport`` reloads the plugin's
        module first, for development loops.
        """
        plugin = next((p for p in self._plugins if p.name == name), None)
        if plugin is None:
            raise DshError(f"no loaded plugin is named {name!r}", "INVALID_ARGUMENT")
        if plugin.info.provides:
            raise DshError(
                f"plugin {name!r} provides {list(plugin.info.provides)}; only plugins that "
                "provide no ctx keys can be reloaded",
                "RELOAD_UNSUPPORTED",
            )
        section = config if config is not None else self._config.get(name)
        validated = validate_config(plugin, section)
        if reimport and isinstance(plugin.module, types.ModuleType):
            plugin = attrs.evolve(plugin, module=importlib.reload(plugin.module))
            self._plugins = [plugin if p.name == name else p for p in self._plugins]
        ctx = self.ctx
        ctx.run_unloads(name)
        ctx.tools.unregister_plugin(name)
        ctx.current_plugin = name
        try:
            for impl in _hookimpls(plugin, "dsh_apply"):
                impl(ctx=ctx, config=validated)
        finally:
            ctx.current_plugin = None
        if config is not None:
            self._config[name] = dict(config)

    def create_agent(self, agent_id: str) -> Agent:
        """Create an owner identity; the harness disposes it on exit."""
        if self._closed:
            raise DshError("the harness is closed", "SERVICE_DISPOSING")
        agent = Agent(agent_id)
        self._agents.append(agent)
        return agent

    async def call_tool(
        self,
        agent: Agent,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        cancel: Cancellation | None = None,
    ) -> ToolResult:
        """Call tool ``name`` as ``agent``; failures come back as ``is_error`` results."""
        exec_ = ToolExec(agent=agent, cancel=cancel or Cancellation())
        tools: ToolRegistry = self.ctx.tools
        return await tools.call(name, dict(args) if args is not None else {}, exec_)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """Every registered tool as ``{name, description, parameters}``."""
        return self.ctx.tools.schemas()  # type: ignore[no-any-return]

    def system_prompt(self) -> str:
        """The assembled guidance text of every plugin, in section order."""
        return self.ctx.system_prompt.render()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """Dispose every agent, then every service newest first; aggregate failures."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for agent in reversed(self._agents):
            try:
                await agent.dispose()
            except Exception as exc:
                errors.append(exc)
        for _key, service in reversed(self.ctx.resolved_services()):
            try:
                await dispose_service(service)
            except Exception as exc:
                errors.append(exc)
        if errors:
            raise DisposeError("harness shutdown left failures", errors)


def _hookimpls(plugin: LoadedPlugin, hook: str) -> list[Any]:
    function = getattr(plugin.module, hook, None)
    return [function] if callable(function) else []
