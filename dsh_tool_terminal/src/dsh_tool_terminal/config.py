"""Validated configuration of the terminal tools (plugin section ``tool-terminal``)."""

from __future__ import annotations

from typing import Any

import attrs

from dsh_terminal_core.config import boolean

__all__ = ["MIN_RESULT_BYTES", "ToolTerminalConfig"]

MIN_RESULT_BYTES = 64


def _result_bytes(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RESULT_BYTES:
        raise ValueError(
            f"{attribute.name} must be an integer >= {MIN_RESULT_BYTES}, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ToolTerminalConfig:
    enable_run_in_background: bool = attrs.field(default=True, validator=boolean)
    max_result_bytes: int = attrs.field(default=262144, validator=_result_bytes)
