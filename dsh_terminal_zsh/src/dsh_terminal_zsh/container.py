"""Wiring for the zsh backend: the bash backend's needs, built with zsh's policy."""

from __future__ import annotations

from dependency_injector import containers, providers

from dsh_terminal_bash import ShellBackend
from dsh_terminal_core import optional_dependency
from dsh_terminal_core.provider import TerminalProvider
from dsh_terminal_core.registry import TerminalSessionService
from dsh_terminal_core.sandbox.bwrap import BwrapSandbox
from dsh_terminal_core.sandbox.limits import OwnerLimitsService
from dsh_terminal_core.sandbox.policy import SandboxPolicyService

from .config import ZshConfig
from .environment import ZSH

__all__ = ["ZshContainer"]


class ZshContainer(containers.DeclarativeContainer):
    """Builds the backend from the core services; the plugin registers it with ``terminals``."""

    config = providers.Dependency(instance_of=ZshConfig)
    subprocess = providers.Dependency(instance_of=TerminalProvider)  # type: ignore[type-abstract]
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    sandbox_policy = providers.Dependency(instance_of=SandboxPolicyService)
    sandbox = optional_dependency(BwrapSandbox)
    owner_limits = optional_dependency(OwnerLimitsService)
    backend = providers.Singleton(
        ShellBackend, subprocess, sandbox_policy, sandbox, config, ZSH, owner_limits=owner_limits
    )
