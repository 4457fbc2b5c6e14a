"""Plugin ``terminal-zsh``: registers the zsh backend (type ``zsh``) with ``ctx.terminals``."""

from __future__ import annotations

from dsh_terminal_bash import shell_plugin

from .config import ZshConfig as Config
from .environment import ZSH

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]

dsh_plugin_info, dsh_apply = shell_plugin(
    "zsh backend: the bash backend's contract with zsh's prompt protocol.", Config, ZSH
)
