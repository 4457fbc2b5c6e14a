"""Validated configuration of the fish backend (plugin section ``terminal-fish``)."""

from __future__ import annotations

import attrs

from dsh_terminal_bash import BashConfig
from dsh_terminal_core.kernel.config import non_empty_str, str_list

__all__ = ["FishConfig"]


@attrs.frozen(kw_only=True)
class FishConfig(BashConfig):
    """The bash backend's settings and defaults, for fish: only the shell differs."""

    backend_type: str = attrs.field(default="fish", validator=non_empty_str)
    shell_path: str = attrs.field(default="/usr/bin/fish", validator=non_empty_str)
    shell_args: tuple[str, ...] = attrs.field(
        default=("--no-config", "-i"), converter=tuple, validator=str_list
    )
