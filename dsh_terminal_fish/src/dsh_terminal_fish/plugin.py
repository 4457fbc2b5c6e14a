"""Plugin ``terminal-fish``: registers the fish backend (type ``fish``) with ``ctx.terminals``."""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

from .config import FishConfig as Config
from .container import FishContainer

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="terminal-fish",
        description="fish backend: the bash backend's contract with fish's prompt protocol.",
        config=Config,
        container=FishContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config, container: FishContainer) -> None:
    ctx.on_unload(container.terminals().register_backend(container.backend()))
