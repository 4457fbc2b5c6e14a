"""Wiring for the ssh consumer: what it needs, named, and the one service it builds."""

from __future__ import annotations

from dependency_injector import containers, providers

from dsh_pty_session import PtySessionService

from .config import SshConfig
from .service import SshService

__all__ = ["SshContainer"]


class SshContainer(containers.DeclarativeContainer):
    """``pty`` is required; ``sandbox_policy`` is read when present (the network check).

    The service gets the providers themselves, not their values, so it resolves the
    facade on each open and a test's override of ``pty`` still takes effect.
    """

    config = providers.Dependency(instance_of=SshConfig)
    pty = providers.Dependency(instance_of=PtySessionService)
    sandbox_policy: providers.Dependency[object] = providers.Dependency(default=None)
    service = providers.Singleton(SshService, pty.provider, config, sandbox_policy.provider)
