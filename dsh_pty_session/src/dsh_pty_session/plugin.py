"""Plugin ``pty-session``: provides ``ctx.pty`` and the four ``pty_*`` tools."""

from __future__ import annotations

from typing import Any

from dsh_terminal_core.hookspecs import hookimpl
from dsh_terminal_core.plugins import PluginInfo

from .config import PtySessionConfig as Config
from .container import PtySessionContainer
from .tools import pty_tools

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="pty-session",
        description="Protocol-free PTY byte-stream facade (ctx.pty) and four pty_* tools.",
        provides=("pty",),
        inject=("terminals",),
        config=Config,
        container=PtySessionContainer,
    )


@hookimpl
def dsh_apply(ctx: Any, config: Config) -> None:
    # The tools resolve ctx.pty on each call, so applying starts nothing and a service
    # override installed after startup still takes effect.
    for tool in pty_tools(lambda: ctx.pty):
        ctx.tools.register(tool)
