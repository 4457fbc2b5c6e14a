"""Which tools a server offers under ``dsh-terminal mcp --tools`` (SPEC §30.1).

A tool profile serves the same sessions under the tool shapes a peer's models were
trained on (``codex``: ``exec_command``/``write_stdin``; ``claude``: ``Bash``,
``TaskOutput``, ``TaskStop``). The ``tool-terminal`` plugin registers a profile's tools
in place of the ``terminal_*`` ones; a server started with ``--tools codex`` or
``--tools claude`` also offers nothing else, so the client sees exactly the peer's set.
``dsh`` (the default) offers every registered tool, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..kernel.errors import ToolNotFound
from ..kernel.harness import Harness

__all__ = ["PROFILE_PLUGIN", "TOOL_PROFILES", "offered_tools", "profile_of", "with_profile"]

#: The plugin whose config section carries ``profile`` and whose tools a profile offers.
PROFILE_PLUGIN = "tool-terminal"
TOOL_PROFILES = ("dsh", "codex", "claude")
#: Codex's cap on running exec sessions (``MAX_UNIFIED_EXEC_PROCESSES``).
CODEX_SESSIONS = 64


def with_profile(config: dict[str, dict[str, Any]], tools: str | None) -> dict[str, dict[str, Any]]:
    """``config`` with ``--tools`` written into the ``tool-terminal`` section (the flag
    wins over the file); unchanged when the flag was not given.

    ``--tools codex`` also lets an agent hold Codex's 64 running sessions: the registry's
    ``max_sessions_per_owner`` becomes 64 unless the file sets it.
    """
    if tools is not None:
        config[PROFILE_PLUGIN] = {**config.get(PROFILE_PLUGIN, {}), "profile": tools}
    if tools == "codex":
        config["terminals"] = {
            "max_sessions_per_owner": CODEX_SESSIONS,
            **config.get("terminals", {}),
        }
    return config


def profile_of(config: Mapping[str, Mapping[str, Any]]) -> str:
    """The profile ``config`` asks for (``dsh`` when it names none)."""
    return str(config.get(PROFILE_PLUGIN, {}).get("profile", "dsh"))


def offered_tools(harness: Harness, profile: str) -> Callable[[str], bool]:
    """Whether the server offers the tool of that name: every tool under ``dsh``, only the
    profile's own (registered by ``tool-terminal``) under another profile."""
    if profile == "dsh":
        return lambda _name: True

    def offered(name: str) -> bool:
        try:
            return harness.ctx.tools.get(name).plugin == PROFILE_PLUGIN  # type: ignore[no-any-return]
        except ToolNotFound:
            return False

    return offered
