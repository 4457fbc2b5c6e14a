"""dsh-terminal bash backend: controlled prompt, readiness ladder, scrollback.

Also the shell-neutral base the zsh and fish backends are built from:
:class:`ShellBackend`, :class:`ShellPolicy`, :func:`session_environment`, and
:func:`shell_plugin`, which wires a backend's config and policy into the host.
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
from .wiring import ShellContainer, shell_container, shell_plugin

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
    "ShellContainer",
    "ShellPolicy",
    "owner_marker",
    "session_environment",
    "shell_container",
    "shell_environment",
    "shell_plugin",
]
