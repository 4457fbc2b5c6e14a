"""dsh-terminal bash backend: controlled prompt, readiness ladder, scrollback."""

from .backend import BashBackend
from .config import BashConfig
from .environment import PROMPT, PROMPT_COMMAND, PS1, shell_environment
from .session import BashSession

__all__ = [
    "PROMPT",
    "PROMPT_COMMAND",
    "PS1",
    "BashBackend",
    "BashConfig",
    "BashSession",
    "shell_environment",
]
