"""The scrollback moved to :mod:`dsh_terminal_core.registry.scrollback`.

A world's harness keeps a mirror of each session's scrollback without installing this
backend (SPEC §21), so the one implementation lives in core; this path keeps working.
"""

from dsh_terminal_core.registry.scrollback import Scrollback

__all__ = ["Scrollback"]
