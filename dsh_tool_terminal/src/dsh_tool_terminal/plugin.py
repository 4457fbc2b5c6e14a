"""Plugin ``tool-terminal``: the six ``terminal_*`` tools and their guidance section."""

from __future__ import annotations

from typing import Any

from dsh_terminal_core.hookspecs import hookimpl
from dsh_terminal_core.plugins import PluginInfo

from .config import ToolTerminalConfig as Config
from .guidance import GUIDANCE, GUIDANCE_ORDER
from .tools import terminal_tools

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="tool-terminal",
        description="Six model-facing terminal tools; background sends run as jobs.",
        inject=("terminals",),
        optional_inject=("jobs",),
        config=Config,
    )


@hookimpl
def dsh_apply(ctx: Any, config: Config) -> None:
    def jobs() -> Any | None:
        return ctx.jobs if ctx.has("jobs") else None

    for tool in terminal_tools(lambda: ctx.terminals, jobs, config):
        ctx.tools.register(tool)
    ctx.system_prompt.section("terminal-guidance", GUIDANCE_ORDER, GUIDANCE)
