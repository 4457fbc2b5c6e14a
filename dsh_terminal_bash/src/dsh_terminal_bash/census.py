"""Find the bash backend's shells by the marker they carry (for leak checks and benchmarks).

The marker names are the backend's own (:func:`.environment.owner_marker`); the generic
search over ``/proc/<pid>/environ`` is the core's.
"""

from __future__ import annotations

from dsh_terminal_core.provider.census import processes_with_env

from .environment import SHELL_MARKER, owner_marker

__all__ = ["shells_marked", "shells_of"]


def shells_of(agent_id: str) -> list[int]:
    """Pids of the shells (and everything they started) of the agent named ``agent_id``."""
    return processes_with_env(owner_marker(agent_id))


def shells_marked(extra: dict[str, str]) -> list[int]:
    """Pids of bash-backend shells (and their children) that also carry ``extra``."""
    return processes_with_env({**SHELL_MARKER, **extra})
