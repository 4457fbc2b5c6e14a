"""One dependency-injector container per core plugin.

Each takes the plugin's validated ``config`` and a ``deps`` container with the ctx keys
it injects; the harness composes them into the root container.
"""

from __future__ import annotations

from dependency_injector import containers, providers

from .jobs import JobService
from .provider.terminal import LocalTerminalProvider
from .sandbox.bwrap import BwrapSandbox
from .sandbox.policy import SandboxPolicyService
from .terminals.service import TerminalSessionService

__all__ = [
    "JobsContainer",
    "SandboxBwrapContainer",
    "SandboxPolicyContainer",
    "SubprocessContainer",
    "TerminalsContainer",
]


class SubprocessContainer(containers.DeclarativeContainer):
    """The local PTY provider (``ctx.subprocess``)."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()
    subprocess = providers.Singleton(LocalTerminalProvider)


class TerminalsContainer(containers.DeclarativeContainer):
    """The owner-scoped session registry (``ctx.terminals``)."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()
    terminals = providers.Singleton(
        TerminalSessionService, max_sessions_per_owner=config.provided.max_sessions_per_owner
    )


class SandboxPolicyContainer(containers.DeclarativeContainer):
    """Sandbox mode resolution per owner (``ctx.sandbox_policy``)."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()
    sandbox_policy = providers.Singleton(SandboxPolicyService, config)


class SandboxBwrapContainer(containers.DeclarativeContainer):
    """The bubblewrap sandbox (``ctx.sandbox``)."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()
    sandbox = providers.Singleton(BwrapSandbox, config)


class JobsContainer(containers.DeclarativeContainer):
    """Background jobs (``ctx.jobs``)."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()
    jobs = providers.Singleton(JobService, max_output_bytes=config.provided.max_output_bytes)
