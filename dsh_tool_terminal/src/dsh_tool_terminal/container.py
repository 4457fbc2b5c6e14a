"""Wiring for the terminal tools: they need ``terminals`` and use ``jobs`` when present."""

from __future__ import annotations

from dependency_injector import containers, providers

from dsh_terminal_core import optional_dependency
from dsh_terminal_core.kernel.jobs import JobService
from dsh_terminal_core.registry import TerminalSessionService
from dsh_terminal_core.secrets import SecretsService

from .config import ToolTerminalConfig
from .tools import terminal_tools

__all__ = ["ToolTerminalContainer"]


class ToolTerminalContainer(containers.DeclarativeContainer):
    """Builds the six tools. Services are passed as providers so each call resolves them
    afresh: a test's container override of ``terminals`` reaches tools built earlier."""

    config = providers.Dependency(instance_of=ToolTerminalConfig)
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    jobs = optional_dependency(JobService)
    secrets = optional_dependency(SecretsService)
    tools = providers.Singleton(
        terminal_tools, terminals.provider, jobs.provider, config, secrets.provider
    )
