"""Plugin ``terminal-fish``: registers the fish backend (type ``fish``) with ``ctx.terminals``."""

from __future__ import annotations

from dsh_terminal_bash import shell_plugin

from .config import FishConfig as Config
from .environment import FISH

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]

dsh_plugin_info, dsh_apply = shell_plugin(
    "fish backend: the bash backend's contract with fish's prompt protocol.", Config, FISH
)
