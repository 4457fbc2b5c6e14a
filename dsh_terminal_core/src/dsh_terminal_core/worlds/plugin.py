"""Plugin ``worlds``: the configured execution worlds as ``ctx.worlds`` (SPEC §21).

Registers each configured world with the session registry, so ``terminal_open
{world}`` (and every consumer's open, through the registry) can open a terminal there.
"""

from __future__ import annotations

from typing import Any

from dependency_injector import containers, providers

from ..kernel.agents import Agent
from ..kernel.context import Context
from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from ..kernel.wiring import optional_dependency
from ..sandbox.policy import SandboxPolicyService
from .config import WorldsConfig
from .service import WorldsService

__all__ = [
    "WorldsContainer",
    "dsh_agent_created",
    "dsh_apply",
    "dsh_harness_closing",
    "dsh_plugin_info",
]

Config = WorldsConfig


def _mode_of(policy: SandboxPolicyService | None) -> Any:
    """The mode a world is told for an owner: only one chosen for that owner.

    The harness's deployment default is this host's (its bubblewrap); a world defaults to
    what it can do there (``world --sandbox``; a container's daemon runs unconfined, the
    container being the sandbox). A mode set for the owner travels, and a world that
    cannot enforce it refuses the open naming itself.
    """

    def mode(owner: Any) -> str | None:
        chosen = None if policy is None else policy.override(owner)
        return None if chosen is None else str(chosen.value)

    return mode


class WorldsContainer(containers.DeclarativeContainer):
    """The worlds (``ctx.worlds``), told each owner's sandbox mode by ``sandbox_policy``."""

    config = providers.Dependency(instance_of=WorldsConfig)
    sandbox_policy = optional_dependency(SandboxPolicyService)
    worlds = providers.Singleton(
        WorldsService, config, providers.Callable(_mode_of, sandbox_policy)
    )


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="worlds",
        description="Execution worlds: terminals in containers, pods and remote hosts.",
        provides=("worlds",),
        config=Config,
        container=WorldsContainer,
        # Applied after the registry it joins, when there is one.
        optional_inject=("terminals",),
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config) -> None:
    if ctx.has("terminals"):
        ctx.terminals.use_worlds(ctx.worlds)


@hookimpl
def dsh_agent_created(agent: Agent, ctx: Context) -> None:
    """Bring back what a daemon kept for this agent id; its first call waits for it."""
    if not ctx.has("worlds") or not ctx.has("terminals"):
        return
    worlds: WorldsService = ctx.worlds
    if any(worlds.keeps_sessions(entry) for entry in worlds.config.worlds.values()):
        agent.expect(worlds.adopt(agent, ctx.terminals))


@hookimpl
def dsh_harness_closing(ctx: Context) -> None:
    """A clean shutdown: sessions of ``persist`` worlds are detached, not closed."""
    if ctx.has("worlds"):
        ctx.worlds.shutting_down = True
