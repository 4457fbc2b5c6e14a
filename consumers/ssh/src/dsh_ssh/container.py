"""Wiring for the ssh consumer: what it needs, named, and what it builds."""

from __future__ import annotations

from dependency_injector import containers, providers

from dsh_pty_session import PtySessionService
from dsh_terminal_core import optional_dependency
from dsh_terminal_core.sandbox.policy import SandboxPolicyService
from dsh_terminal_core.secrets import SecretsService

from .config import SshConfig
from .service import SshService
from .tools import ssh_tools

__all__ = ["SshContainer"]


class SshContainer(containers.DeclarativeContainer):
    """``pty`` is required; ``sandbox_policy`` is read when present (the network check).

    The service gets the providers themselves, not their values, so it resolves them on
    each open and a test's override of ``pty`` still takes effect.
    """

    config = providers.Dependency(instance_of=SshConfig)
    pty = providers.Dependency(instance_of=PtySessionService)
    sandbox_policy = optional_dependency(SandboxPolicyService)
    service = providers.Singleton(SshService, pty.provider, config, sandbox_policy.provider)
    secrets = optional_dependency(SecretsService)
    tools = providers.Singleton(ssh_tools, service.provider, secrets.provider)
