"""The harness: loads plugins, composes their containers, owns agents and tools.

This is the public entry point for tests, the CLI, the MCP server and outside hosts::

    async with Harness(plugins=None, config={...}) as h:
        agent = h.create_agent("agent-1")
        result = await h.call_tool(agent, "terminal_open", {"type": "shell"})
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

import pluggy
from dependency_injector import containers, providers

from .agents import Agent
from .cancel import NEVER_CANCELLED, Cancellation
from .context import Context, dispose_service
from .errors import ConfigError, DisposeError, DshError
from .heapfreeze import freeze_loaded_heap
from .humanask import HumanAsker
from .plugins import (
    ENTRY_POINT_GROUP,
    LoadedPlugin,
    call_plugin_hook,
    load_plugins,
    order_plugins,
    plugin_manager,
    register_plugin,
    validate_config,
)
from .prompt import SystemPrompt
from .secret import SecretAsker
from .tools import ToolExec, ToolRegistry, ToolResult
from .wiring import build_container, kept_resolution

__all__ = ["ARRIVAL_WAIT_S", "Harness"]

#: How long a tool call waits for what its agent's creation started (its sessions
#: coming back from a world); longer work finishes in the background.
ARRIVAL_WAIT_S = 1.0


class Harness:
    """A running set of plugins with their services, agents and tools."""

    def __init__(
        self,
        plugins: Sequence[object] | None = None,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        group: str = ENTRY_POINT_GROUP,
        freeze_heap: bool = True,
    ) -> None:
        """``freeze_heap``: once the plugins are applied, keep everything loaded so far out
        of the garbage collector's full passes (once per process; see ``heapfreeze``), so
        that a full pass while terminals open does not stop the loop for tens of ms. A
        host that manages the collector itself passes False."""
        self._plugin_objects = plugins
        self._config = dict(config or {})
        self._group = group
        self._freeze_heap = freeze_heap
        self.ctx = Context()
        self.pm: pluggy.PluginManager = plugin_manager()
        """The one plugin manager: every loaded plugin is registered on it by name."""
        self._plugins: list[LoadedPlugin] = []
        self._containers: dict[str, containers.DeclarativeContainer | None] = {}
        self._agents: list[Agent] = []
        # ``ctx.tools`` kept at hand, so a call finds the registry without resolving the
        # key; an override of the key still applies.
        self._tools: Callable[[], ToolRegistry] | None = None
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
        try:
            loaded = order_plugins(load_plugins(self.pm, self._plugin_objects, self._group))
        except BaseException:
            self._unregister_all()
            raise
        known = {p.name for p in loaded}
        for section in self._config:
            if section not in known:
                self._unregister_all()
                raise ConfigError(
                    f"config section {section!r} matches no loaded plugin "
                    f"(loaded: {', '.join(sorted(known)) or 'none'})",
                    section,
                )
        try:
            configs = {p.name: validate_config(p, self._config.get(p.name)) for p in loaded}
        except BaseException:
            self._unregister_all()
            raise

        ctx = self.ctx
        ctx.provide("tools", providers.Singleton(ToolRegistry, lambda: ctx.current_plugin))
        self._tools = kept_resolution(ctx.provider("tools"))
        ctx.provide("system_prompt", providers.Singleton(SystemPrompt))
        ctx.provide("plugin_manager", providers.Object(self.pm))
        self._plugins = loaded
        self._started = True
        try:
            # Containers first, in load order, so each is built against the root
            # providers of the keys it needs; then every plugin applies.
            for plugin in loaded:
                self._containers[plugin.name] = self._build(plugin, configs[plugin.name])
            for plugin in loaded:
                self._apply(plugin, configs[plugin.name])
        except BaseException:
            await self.aclose()
            raise
        if self._freeze_heap:
            freeze_loaded_heap()

    def _build(
        self, plugin: LoadedPlugin, config: object
    ) -> containers.DeclarativeContainer | None:
        """Build ``plugin``'s container and publish the keys it provides on the context."""
        info = plugin.info
        if info.container is None:
            if info.provides:
                raise DshError(
                    f"plugin {plugin.name!r} provides {list(info.provides)} but has no container",
                    "PLUGIN_LOAD",
                )
            return None
        ctx = self.ctx
        container = build_container(
            plugin.name,
            info.container,
            config,
            lambda key: ctx.provider(key) if ctx.has(key) else None,
        )
        for key in info.provides:
            provider = getattr(container, key, None)
            if not isinstance(provider, providers.Provider):
                raise DshError(
                    f"plugin {plugin.name!r} says it provides {key!r} but its container "
                    f"{info.container.__name__} has no provider of that name",
                    "PLUGIN_LOAD",
                )
            ctx.provide(key, provider)
        return container

    def _apply(self, plugin: LoadedPlugin, config: object) -> None:
        ctx = self.ctx
        ctx.current_plugin = plugin.name
        try:
            call_plugin_hook(
                self.pm,
                plugin.module,
                "dsh_apply",
                ctx=ctx,
                config=config,
                container=self._containers.get(plugin.name),
            )
        except DshError:
            raise
        except Exception as exc:
            raise DshError(
                f"plugin {plugin.name!r} failed to apply: {type(exc).__name__}: {exc}",
                "PLUGIN_LOAD",
            ) from exc
        finally:
            ctx.current_plugin = None

    async def reload_plugin(
        self, name: str, config: Mapping[str, Any] | None = None, *, reimport: bool = False
    ) -> None:
        """Replace a loaded plugin's contributions, optionally with a new config section.

        Its tools, prompt sections and backends are unregistered, its container is built
        again, and the plugin applies again. Sessions live on: they belong to their
        owners and the registry, not to the plugin that created them, so a backend or
        tool reload never closes a terminal. Plugins that provide ctx keys cannot be
        reloaded (services others hold would go stale): that raises
        ``RELOAD_UNSUPPORTED``. ``reimport`` reloads the plugin's module first, for
        development loops; the new module replaces the old on the plugin manager.
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
            module = importlib.reload(plugin.module)
            self.pm.unregister(plugin.module)
            try:
                plugin = register_plugin(self.pm, module, plugin.source, name)
            except BaseException:
                self.pm.register(plugin.module, name=name)
                raise
            self._plugins = [plugin if p.name == name else p for p in self._plugins]
            validated = validate_config(plugin, section)
        container = self._build(plugin, validated)
        ctx = self.ctx
        ctx.run_unloads(name)
        ctx.tools.unregister_plugin(name)
        self._containers[name] = container
        self._apply(plugin, validated)
        if config is not None:
            self._config[name] = dict(config)

    def _unregister_all(self) -> None:
        for _name, plugin in list(self.pm.list_name_plugin()):
            self.pm.unregister(plugin)

    def create_agent(self, agent_id: str) -> Agent:
        """Create an owner identity; the harness disposes it on exit."""
        if self._closed:
            raise DshError("the harness is closed", "SERVICE_DISPOSING")
        agent = Agent(agent_id)
        self._agents.append(agent)
        if self._started:
            self.pm.hook.dsh_agent_created(agent=agent, ctx=self.ctx)
        return agent

    async def call_tool(
        self,
        agent: Agent,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        cancel: Cancellation | None = None,
        ask_secret: SecretAsker | None = None,
        identity: str | None = None,
        ask_human: HumanAsker | None = None,
    ) -> ToolResult:
        """Call tool ``name`` as ``agent``; failures come back as ``is_error`` results.

        ``cancel`` is the caller's token: cancelling it stops the call the way the
        terminal's Ctrl-C stops a command, and the call answers ``CANCELLED``. Without
        one the call can still be stopped by cancelling the task that awaits it.
        ``ask_secret`` lets a tool ask the caller's person for a secret (the MCP server
        passes its URL-mode elicitation); without it such a tool answers ``NO_SECRET``.
        ``identity`` names the authenticated identity the call came as (the MCP HTTP
        server passes its bearer-token identity); the audit log records it.
        ``ask_human`` shows the person a control link the same way; without it
        ``terminal_ask_human`` uses the ``dsh_ask_human`` hooks.
        """
        if agent.expecting:
            await agent.arrived(ARRIVAL_WAIT_S)
        exec_ = ToolExec(
            agent=agent,
            cancel=cancel if cancel is not None else NEVER_CANCELLED,
            ask_secret=ask_secret,
            ask_human=ask_human,
            identity=identity,
        )
        # Not started: ctx.tools says which service is missing.
        tools: ToolRegistry = self._tools() if self._tools is not None else self.ctx.tools
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
        if self._started:
            try:
                self.pm.hook.dsh_harness_closing(ctx=self.ctx)
            except Exception as exc:
                errors.append(exc)
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
