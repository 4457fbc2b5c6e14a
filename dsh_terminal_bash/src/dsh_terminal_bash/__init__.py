"""dsh-terminal bash backend: controlled prompt, readiness ladder, scrollback.

Also the shell-neutral base the zsh and fish backends are built from:
:class:`ShellBackend`, :class:`ShellPolicy` and :func:`session_environment`.
"""

from .backend import BashBackend, ShellBackend
from .config import BashConfig
from .environment import (
    BASH,
    PROMPT,
    PROMPT_COMMAND,
    PS1,
    owner_marker,
    session_environment,
    shell_environment,
)
from .session import BashSession
from .shell import LoginReplay, OutputFilter, ShellPolicy

__all__ = [
    "BASH",
    "PROMPT",
    "PROMPT_COMMAND",
    "PS1",
    "BashBackend",
    "BashConfig",
    "BashSession",
    "LoginReplay",
    "OutputFilter",
    "ShellBackend",
    "ShellPolicy",
    "owner_marker",
    "session_environment",
    "shell_environment",
]
