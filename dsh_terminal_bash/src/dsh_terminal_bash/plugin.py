"""Plugin ``terminal-bash``: registers the bash backend (type ``shell``) with ``ctx.terminals``."""

from __future__ import annotations

from typing import Any

from dependency_injector import providers

from dsh_terminal_core.hookspecs import hookimpl
from dsh_terminal_core.plugins import PluginInfo

from .config import BashConfig as Config
from .container import BashContainer

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]

INJECT = ("subprocess", "terminals", "sandbox_policy")
OPTIONAL = ("sandbox",)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="terminal-bash",
        description="Bash backend: controlled prompt, event-driven readiness ladder, scrollback.",
        inject=INJECT,
        optional_inject=OPTIONAL,
        config=Config,
    )


@hookimpl
def dsh_apply(ctx: Any, config: Config) -> None:
    container = BashContainer(
        config=providers.Object(config), deps=ctx.dependencies(INJECT, OPTIONAL)
    )
    ctx.on_unload(ctx.terminals.register_backend(container.backend()))
