"""Wiring for the terminal tools: they inject ``terminals`` and, optionally, ``jobs``."""

from __future__ import annotations

from dependency_injector import containers, providers

from .tools import terminal_tools

__all__ = ["ToolTerminalContainer"]


class ToolTerminalContainer(containers.DeclarativeContainer):
    """Builds the six tools. Services are passed as providers so each call resolves them
    afresh: a test's container override of ``terminals`` reaches tools built earlier."""

    config: providers.Dependency[object] = providers.Dependency()
    deps = providers.DependenciesContainer()  # terminals, jobs (optional: None when absent)
    tools = providers.Singleton(terminal_tools, deps.terminals.provider, deps.jobs.provider, config)
