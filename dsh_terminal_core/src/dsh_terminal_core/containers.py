"""One dependency-injector container per core plugin.

Each names its validated ``config`` and the ctx keys it needs as
``providers.Dependency`` fields (see :mod:`.wiring`); the harness builds them, wires
each need to the root provider of its key and composes them into the root container.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy
from dependency_injector import containers, providers

from .agents import Agent
from .config import JobsConfig, TerminalsConfig
from .jobs import JobService
from .provider.terminal import LocalTerminalProvider
from .sandbox.bwrap import BwrapConfig, BwrapSandbox
from .sandbox.policy import ActivityProbe, OwnerActivity, SandboxPolicyConfig, SandboxPolicyService
from .secrets import SecretsConfig, SecretsService
from .terminals.service import TerminalSessionService
from .wiring import optional_dependency

__all__ = [
    "JobsContainer",
    "SandboxBwrapContainer",
    "SandboxPolicyContainer",
    "SecretsContainer",
    "SubprocessContainer",
    "TerminalsContainer",
]


class SubprocessContainer(containers.DeclarativeContainer):
    """The local PTY provider (``ctx.subprocess``)."""

    subprocess = providers.Singleton(LocalTerminalProvider)


class TerminalsContainer(containers.DeclarativeContainer):
    """The owner-scoped session registry (``ctx.terminals``)."""

    config = providers.Dependency(instance_of=TerminalsConfig)
    terminals = providers.Singleton(
        TerminalSessionService, max_sessions_per_owner=config.provided.max_sessions_per_owner
    )


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


class SandboxBwrapContainer(containers.DeclarativeContainer):
    """The bubblewrap sandbox (``ctx.sandbox``)."""

    config = providers.Dependency(instance_of=BwrapConfig)
    sandbox = providers.Singleton(BwrapSandbox, config)


class JobsContainer(containers.DeclarativeContainer):
    """Background jobs (``ctx.jobs``)."""

    config = providers.Dependency(instance_of=JobsConfig)
    jobs = providers.Singleton(JobService, max_output_bytes=config.provided.max_output_bytes)


class SecretsContainer(containers.DeclarativeContainer):
    """Named secrets (``ctx.secrets``); third-party sources come through the plugin manager."""

    config = providers.Dependency(instance_of=SecretsConfig)
    plugin_manager = providers.Dependency(instance_of=pluggy.PluginManager)
    secrets = providers.Singleton(SecretsService, config, plugin_manager)
