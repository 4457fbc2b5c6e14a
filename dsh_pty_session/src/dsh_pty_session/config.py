"""Validated configuration of the pty facade (plugin section ``pty-session``)."""

from __future__ import annotations

import attrs

from dsh_terminal_core.kernel.config import non_empty_str, positive_int

__all__ = ["PtySessionConfig"]


@attrs.frozen(kw_only=True)
class PtySessionConfig:
    """``backend_type``: the registry type ``open`` spawns (env export needs ``shell``).
    ``tail_lines``: how many of the newest new lines a tail returns when none is given.
    """

    backend_type: str = attrs.field(default="shell", validator=non_empty_str)
    tail_lines: int = attrs.field(default=200, validator=positive_int)
