"""Plugin ``gdb-mi``: the ``gdb_mi`` tool, built on ``ctx.pty`` only.

It injects ``pty`` (so ``dsh-pty-session`` is a hard startup dependency) and never the
terminal tools. Applying it registers one tool and starts nothing: every harness that
discovers the plugin pays no process for it until an agent calls ``gdb_mi``.
"""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

from .container import GdbMiContainer

__all__ = ["dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="gdb-mi",
        description="gdb/MI debugger over ctx.pty: one gdb per agent, MI records parsed.",
        container=GdbMiContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, container: GdbMiContainer) -> None:
    ctx.tools.register(container.tool())
