"""Plugin ``tool-terminal``: the ``terminal_*`` tools (watch links too) and their guidance,
or a tool profile's tools (``codex``, ``claude``; SPEC §30.1) in their place."""

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
    # A profile serves the same sessions under a peer's tool shapes instead (SPEC §30.1);
    # its tools carry their own descriptions, as the peer's model expects them.
    if config.profile == "codex":
        for tool in container.codex_tools():
            ctx.tools.register(tool)
        return
    if config.profile == "claude":
        for tool in container.claude_tools():
            ctx.tools.register(tool)
        return
    for tool in (*container.tools(), *container.watch_tools()):
        ctx.tools.register(tool)
    ctx.tools.register(container.search())
    background = config.enable_run_in_background and ctx.has("jobs")
    ctx.system_prompt.section("terminal-guidance", GUIDANCE_ORDER, guidance(background))
    ctx.on_unload(lambda: ctx.system_prompt.remove("terminal-guidance"))
