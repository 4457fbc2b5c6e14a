"""Wiring for the bash backend: what it injects and how it is built."""

from __future__ import annotations

from dependency_injector import containers, providers

from .backend import BashBackend

__all__ = ["BashContainer"]


class BashContainer(containers.DeclarativeContainer):
    """Builds the backend from the core services it injects."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()  # subprocess, sandbox_policy, sandbox (optional)
    backend = providers.Singleton(
        BashBackend, deps.subprocess, deps.sandbox_policy, deps.sandbox, config
    )
