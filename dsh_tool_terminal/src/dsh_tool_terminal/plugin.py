"""Plugin ``tool-terminal``: the ``terminal_*`` tools (watch links too) and their guidance."""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

from .config import ToolTerminalConfig as Config
from .container import ToolTerminalContainer
from .guidance import GUIDANCE_ORDER, guidance

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="tool-terminal",
        description="The model-facing terminal tools; background sends run as jobs.",
        config=Config,
        container=ToolTerminalContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config, container: ToolTerminalContainer) -> None:
    for tool in (*container.tools(), *container.watch_tools()):
        ctx.tools.register(tool)
    ctx.tools.register(container.search())
    background = config.enable_run_in_background and ctx.has("jobs")
    ctx.system_prompt.section("terminal-guidance", GUIDANCE_ORDER, guidance(background))
    ctx.on_unload(lambda: ctx.system_prompt.remove("terminal-guidance"))
