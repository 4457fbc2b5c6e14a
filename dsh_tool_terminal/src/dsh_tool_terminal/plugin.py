"""Plugin ``tool-terminal``: the six ``terminal_*`` tools and their guidance section."""

from __future__ import annotations

from typing import Any

from dependency_injector import providers

from dsh_terminal_core.hookspecs import hookimpl
from dsh_terminal_core.plugins import PluginInfo

from .config import ToolTerminalConfig as Config
from .container import ToolTerminalContainer
from .guidance import GUIDANCE, GUIDANCE_ORDER

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]

INJECT = ("terminals",)
OPTIONAL = ("jobs",)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="tool-terminal",
        description="Six model-facing terminal tools; background sends run as jobs.",
        inject=INJECT,
        optional_inject=OPTIONAL,
        config=Config,
    )


@hookimpl
def dsh_apply(ctx: Any, config: Config) -> None:
    container = ToolTerminalContainer(
        config=providers.Object(config), deps=ctx.dependencies(INJECT, OPTIONAL)
    )
    for tool in container.tools():
        ctx.tools.register(tool)
    ctx.system_prompt.section("terminal-guidance", GUIDANCE_ORDER, GUIDANCE)
    ctx.on_unload(lambda: ctx.system_prompt.remove("terminal-guidance"))
