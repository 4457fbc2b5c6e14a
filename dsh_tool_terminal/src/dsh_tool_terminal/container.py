"""Wiring for the terminal tools: they need ``terminals`` and use ``jobs`` when present."""

from __future__ import annotations

from dependency_injector import containers, providers

from dsh_terminal_core import optional_dependency
from dsh_terminal_core.human import HumanService
from dsh_terminal_core.kernel.jobs import JobService
from dsh_terminal_core.registry import TerminalSessionService
from dsh_terminal_core.secrets import SecretsService

from .claude import claude_tools
from .codex import codex_tools
from .config import ToolTerminalConfig
from .search import search_tool
from .tools import terminal_tools
from .watch import watch_tools

__all__ = ["ToolTerminalContainer"]


class ToolTerminalContainer(containers.DeclarativeContainer):
    """Builds the terminal tools and the watch tools (SPEC §22), and a profile's (§30.1).

    Services are passed as providers so each call resolves them afresh: a test's
    container override of ``terminals`` reaches tools built earlier."""

    config = providers.Dependency(instance_of=ToolTerminalConfig)
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    jobs = optional_dependency(JobService)
    secrets = optional_dependency(SecretsService)
    human = optional_dependency(HumanService)
    tools = providers.Singleton(
        terminal_tools, terminals.provider, jobs.provider, config, secrets.provider
    )
    watch_tools = providers.Singleton(
        watch_tools, human.provider, terminals.provider, config.provided.max_result_bytes
    )
    search = providers.Singleton(search_tool, terminals.provider, config)
    codex_tools = providers.Singleton(codex_tools, terminals.provider, config)
    claude_tools = providers.Singleton(claude_tools, terminals.provider, jobs.provider, config)
