"""Plugin ``terminal-zsh``: registers the zsh backend (type ``zsh``) with ``ctx.terminals``."""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

from .config import ZshConfig as Config
from .container import ZshContainer

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="terminal-zsh",
        description="zsh backend: the bash backend's contract with zsh's prompt protocol.",
        config=Config,
        container=ZshContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config, container: ZshContainer) -> None:
    ctx.on_unload(container.terminals().register_backend(container.backend()))
