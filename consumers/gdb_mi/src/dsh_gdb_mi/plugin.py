"""Plugin ``gdb-mi``: the ``gdb_mi`` tool, built on ``ctx.pty`` only.

It injects ``pty`` (so ``dsh-pty-session`` is a hard startup dependency) and never the
terminal tools. Applying it registers one tool and starts nothing: every harness that
discovers the plugin pays no process for it until an agent calls ``gdb_mi``.
"""

from __future__ import annotations

from typing import Any

from dsh_terminal_core.hookspecs import hookimpl
from dsh_terminal_core.plugins import PluginInfo

from .tool import GdbMiSessions, gdb_mi_tool

__all__ = ["dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="gdb-mi",
        description="gdb/MI debugger over ctx.pty: one gdb per agent, MI records parsed.",
        inject=("pty",),
    )


@hookimpl
def dsh_apply(ctx: Any, config: object) -> None:
    # ctx.pty is resolved on first use, not here: a test may still override services.
    ctx.tools.register(gdb_mi_tool(GdbMiSessions(lambda: ctx.pty)))
