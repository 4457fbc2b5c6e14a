"""Wiring for the pty facade: it injects ``terminals`` and provides ``pty``."""

from __future__ import annotations

from dependency_injector import containers, providers

from .service import PtySessionService

__all__ = ["PtySessionContainer"]


class PtySessionContainer(containers.DeclarativeContainer):
    """One facade per harness; ``deps.terminals`` follows container overrides of the host."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()  # terminals
    pty = providers.Singleton(PtySessionService, deps.terminals, config)
