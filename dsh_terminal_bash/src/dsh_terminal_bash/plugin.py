"""Plugin ``terminal-bash``: registers the bash backend (type ``shell``) with ``ctx.terminals``."""

from __future__ import annotations

from .config import BashConfig as Config
from .environment import BASH
from .wiring import shell_plugin

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]

dsh_plugin_info, dsh_apply = shell_plugin(
    "Bash backend: controlled prompt, event-driven readiness ladder, scrollback.", Config, BASH
)
