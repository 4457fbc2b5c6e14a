"""dsh-terminal zsh backend: the bash backend's whole contract, with zsh's prompt protocol."""

from .config import ZshConfig
from .environment import ZDOTDIR, ZSH

__all__ = ["ZDOTDIR", "ZSH", "ZshConfig"]
