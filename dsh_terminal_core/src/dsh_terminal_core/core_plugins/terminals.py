"""Plugin ``terminals``: the owner-scoped terminal session registry as ``ctx.terminals``."""

from __future__ import annotations

from ..config import TerminalsConfig as Config
from ..containers import TerminalsContainer
from ..context import Context
from ..hookspecs import hookimpl
from ..plugins import PluginInfo


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="terminals",
        description="Owner-scoped terminal session registry: ids, authorization, cleanup.",
        provides=("terminals",),
        config=Config,
        container=TerminalsContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config) -> None:
    # Backends are registered by plugins applied later; remember which one registered each.
    ctx.terminals.stamp_backends_with(lambda: ctx.current_plugin)
