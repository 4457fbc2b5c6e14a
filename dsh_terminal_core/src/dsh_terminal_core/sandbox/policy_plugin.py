"""Plugin ``sandbox-policy``: per-owner sandbox mode resolution as ``ctx.sandbox_policy``."""

from __future__ import annotations

from collections.abc import Callable

from dependency_injector import containers, providers

from ..kernel.agents import Agent
from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from ..kernel.wiring import optional_dependency
from .policy import ActivityProbe, OwnerActivity, SandboxPolicyConfig, SandboxPolicyService

__all__ = ["SandboxPolicyContainer", "dsh_plugin_info"]

Config = SandboxPolicyConfig


def _activity_of(registry: Callable[[], OwnerActivity | None]) -> ActivityProbe:
    """The mode fence's probe: asks whatever ``ctx.terminals`` resolves to at check time.

    Resolving per check (not once at build) is what lets a container override of
    ``terminals`` reach the fence of a policy that already exists.
    """

    def probe(owner: Agent) -> bool:
        current = registry()
        return current is not None and current.has_owner_activity(owner)

    return probe


class SandboxPolicyContainer(containers.DeclarativeContainer):
    """Sandbox mode resolution per owner (``ctx.sandbox_policy``), fenced by ``terminals``."""

    config = providers.Dependency(instance_of=SandboxPolicyConfig)
    terminals = optional_dependency(OwnerActivity)
    sandbox_policy = providers.Singleton(
        SandboxPolicyService, config, activity=providers.Callable(_activity_of, terminals.provider)
    )


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="sandbox-policy",
        description="Sandbox modes (read-only, workspace-write, danger-full-access) per owner.",
        provides=("sandbox_policy",),
        config=Config,
        container=SandboxPolicyContainer,
    )
