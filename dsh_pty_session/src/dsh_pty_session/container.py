"""Wiring for the pty facade: it needs ``terminals`` and provides ``pty``."""

from __future__ import annotations

from dependency_injector import containers, providers

from .config import PtySessionConfig
from .service import PtySessionService
from .types import PtyRegistry

__all__ = ["PtySessionContainer"]


class PtySessionContainer(containers.DeclarativeContainer):
    """One facade per harness; ``terminals`` follows container overrides of the host.

    The need is typed by the registry surface the facade uses (:class:`PtyRegistry`),
    so any registry with those calls can stand in for ``ctx.terminals``.
    """

    config = providers.Dependency(instance_of=PtySessionConfig)
    terminals = providers.Dependency(instance_of=PtyRegistry)  # type: ignore[type-abstract]
    pty = providers.Singleton(PtySessionService, terminals, config)
