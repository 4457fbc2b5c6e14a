"""Wiring for the ``gdb_mi`` tool: it needs ``pty`` and nothing else."""

from __future__ import annotations

from dependency_injector import containers, providers

from dsh_pty_session import PtySessionService

from .tool import GdbMiSessions, gdb_mi_tool

__all__ = ["GdbMiContainer"]


class GdbMiContainer(containers.DeclarativeContainer):
    """One session table per harness; ``pty`` is resolved on first use, not at build."""

    pty = providers.Dependency(instance_of=PtySessionService)
    sessions = providers.Singleton(GdbMiSessions, pty.provider)
    tool = providers.Singleton(gdb_mi_tool, sessions)
