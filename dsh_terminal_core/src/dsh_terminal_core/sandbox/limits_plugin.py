"""Plugin ``owner-limits``: cgroup limits per owner as ``ctx.owner_limits`` (SPEC §29)."""

from __future__ import annotations

from dependency_injector import containers, providers

from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from .limitconfig import OwnerLimitsConfig
from .limits import OwnerLimitsService

__all__ = ["OwnerLimitsContainer", "dsh_plugin_info"]

Config = OwnerLimitsConfig


class OwnerLimitsContainer(containers.DeclarativeContainer):
    """Each owner's memory, process and CPU limits and each session's cgroup."""

    config = providers.Dependency(instance_of=OwnerLimitsConfig)
    owner_limits = providers.Singleton(OwnerLimitsService, config)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="owner-limits",
        description=(
            "Memory, process and CPU limits per owner through cgroups; each session in a "
            "cgroup of its own, emptied by force at close."
        ),
        provides=("owner_limits",),
        config=Config,
        container=OwnerLimitsContainer,
    )
