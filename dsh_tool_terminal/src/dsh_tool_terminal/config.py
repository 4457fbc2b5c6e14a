"""Validated configuration of the terminal tools (plugin section ``tool-terminal``)."""

from __future__ import annotations

from typing import Any

import attrs

from dsh_terminal_core import boolean
from dsh_terminal_core.kernel.resultcap import MIN_CAP_BYTES

__all__ = ["DEFAULT_RESULT_BYTES", "MIN_RESULT_BYTES", "PROFILES", "ToolTerminalConfig"]

MIN_RESULT_BYTES = MIN_CAP_BYTES

#: The tool shapes a harness can serve its sessions under (SPEC §30.1): this project's
#: own ``terminal_*`` tools, Codex's unified exec, or Claude Code's Bash and tasks.
PROFILES = ("dsh", "codex", "claude")


def _profile(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in PROFILES:
        raise ValueError(f"{attribute.name} must be one of {', '.join(PROFILES)}, got {value!r}")


def _result_bytes(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RESULT_BYTES:
        raise ValueError(
            f"{attribute.name} must be an integer >= {MIN_RESULT_BYTES}, got {value!r}"
        )


# What a model reads per result. Peers settled on tens of KiB: 30,000 characters with the
# middle cut (Claude Code's bash tool), 10 KiB head + tail (Codex CLI); 32 KiB (about 8k
# tokens) shows a build's first error and its last lines and leaves the context for work.
DEFAULT_RESULT_BYTES = 32 * 1024


@attrs.frozen(kw_only=True)
class ToolTerminalConfig:
    """``max_result_bytes`` bounds every text a tool returns, a send's viewport included.

    ``profile`` picks the tool shapes the sessions are served under (SPEC §30.1): ``dsh``
    (the ``terminal_*`` tools), ``codex`` (``exec_command``/``write_stdin``) or
    ``claude`` (``Bash``/``TaskOutput``/``TaskStop``). The sessions and their semantics
    are the same under each.
    """

    profile: str = attrs.field(default="dsh", validator=_profile)

    enable_run_in_background: bool = attrs.field(default=True, validator=boolean)
    max_result_bytes: int = attrs.field(default=DEFAULT_RESULT_BYTES, validator=_result_bytes)
