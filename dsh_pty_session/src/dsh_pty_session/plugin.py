"""Plugin ``pty-session``: provides ``ctx.pty`` and the four ``pty_*`` tools."""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

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
        config=Config,
        container=PtySessionContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config) -> None:
    # The tools resolve ctx.pty on each call, so applying starts nothing and a service
    # override installed after startup still takes effect.
    for tool in pty_tools(lambda: ctx.pty):
        ctx.tools.register(tool)
