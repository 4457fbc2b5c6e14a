"""Validated configuration of the terminal tools (plugin section ``tool-terminal``)."""

from __future__ import annotations

from typing import Any

import attrs

from dsh_terminal_core import MAX_RESULT_BYTES, boolean
from dsh_terminal_core.resultcap import MIN_CAP_BYTES

__all__ = ["MIN_RESULT_BYTES", "ToolTerminalConfig"]

MIN_RESULT_BYTES = MIN_CAP_BYTES


def _result_bytes(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RESULT_BYTES:
        raise ValueError(
            f"{attribute.name} must be an integer >= {MIN_RESULT_BYTES}, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ToolTerminalConfig:
    enable_run_in_background: bool = attrs.field(default=True, validator=boolean)
    max_result_bytes: int = attrs.field(default=MAX_RESULT_BYTES, validator=_result_bytes)
