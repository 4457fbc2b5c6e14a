"""Validated configuration of the zsh backend (plugin section ``terminal-zsh``)."""

from __future__ import annotations

import attrs

from dsh_terminal_bash import BashConfig
from dsh_terminal_core.kernel.config import non_empty_str, str_list

__all__ = ["ZshConfig"]


@attrs.frozen(kw_only=True)
class ZshConfig(BashConfig):
    """The bash backend's settings and defaults, for zsh: only the shell differs."""

    backend_type: str = attrs.field(default="zsh", validator=non_empty_str)
    shell_path: str = attrs.field(default="/bin/zsh", validator=non_empty_str)
    shell_args: tuple[str, ...] = attrs.field(
        default=("--no-globalrcs", "-i"), converter=tuple, validator=str_list
    )
