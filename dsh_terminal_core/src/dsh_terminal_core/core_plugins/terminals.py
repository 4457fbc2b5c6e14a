"""Plugin ``terminals``: the owner-scoped terminal session registry as ``ctx.terminals``."""

from __future__ import annotations

import attrs

from ..config import positive_int
from ..containers import TerminalsContainer
from ..context import Context
from ..hookspecs import hookimpl
from ..plugins import PluginInfo


@attrs.frozen(kw_only=True)
class Config:
    max_sessions_per_owner: int = attrs.field(default=16, validator=positive_int)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="terminals",
        description="Owner-scoped terminal session registry: ids, authorization, cleanup.",
        provides=("terminals",),
        optional_inject=("sandbox_policy",),
        config=Config,
        container=TerminalsContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config) -> None:
    # Backends are registered by plugins applied later; remember which one registered each.
    ctx.terminals.stamp_backends_with(lambda: ctx.current_plugin)
    # The sandbox mode fence needs to know whether an owner has sessions or spawns in flight.
    if ctx.has("sandbox_policy"):
        ctx.sandbox_policy.set_activity_probe(ctx.terminals.has_owner_activity)
