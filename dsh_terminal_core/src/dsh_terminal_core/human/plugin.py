"""Plugin ``human``: watch links and asking a person for help, as ``ctx.human`` (SPEC §22)."""

from __future__ import annotations

import pluggy
from dependency_injector import containers, providers

from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from ..registry import TerminalSessionService
from .service import HumanService

__all__ = ["HumanContainer", "dsh_apply", "dsh_plugin_info"]


class HumanContainer(containers.DeclarativeContainer):
    """The watch links over the registry; a host shows asks through the plugin manager."""

    terminals = providers.Dependency(instance_of=TerminalSessionService)
    plugin_manager = providers.Dependency(instance_of=pluggy.PluginManager)
    human = providers.Singleton(HumanService, terminals, plugin_manager)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="human",
        description="Watch links to sessions: a live page, taking over, handing back.",
        provides=("human",),
        container=HumanContainer,
    )


@hookimpl
def dsh_apply() -> None:
    """Contributes only ``ctx.human``; the terminal tools offer it when it is loaded."""
