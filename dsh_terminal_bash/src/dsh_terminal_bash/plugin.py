"""Plugin ``terminal-bash``: registers the bash backend (type ``shell``) with ``ctx.terminals``."""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

from .config import BashConfig as Config
from .container import BashContainer

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="terminal-bash",
        description="Bash backend: controlled prompt, event-driven readiness ladder, scrollback.",
        config=Config,
        container=BashContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config, container: BashContainer) -> None:
    ctx.on_unload(container.terminals().register_backend(container.backend()))
