"""Plugin ``terminals``: the owner-scoped terminal session registry as ``ctx.terminals``."""

from __future__ import annotations

import attrs
from dependency_injector import containers, providers

from ..kernel.config import positive_int
from ..kernel.context import Context
from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from .service import TerminalSessionService

__all__ = ["TerminalsConfig", "TerminalsContainer", "dsh_apply", "dsh_plugin_info"]


@attrs.frozen(kw_only=True)
class TerminalsConfig:
    """Config of the ``terminals`` plugin (the session registry)."""

    max_sessions_per_owner: int = attrs.field(default=16, validator=positive_int)


Config = TerminalsConfig


class TerminalsContainer(containers.DeclarativeContainer):
    """The owner-scoped session registry (``ctx.terminals``)."""

    config = providers.Dependency(instance_of=TerminalsConfig)
    terminals = providers.Singleton(
        TerminalSessionService, max_sessions_per_owner=config.provided.max_sessions_per_owner
    )


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
