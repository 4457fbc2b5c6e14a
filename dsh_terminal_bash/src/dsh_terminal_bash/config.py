"""Validated configuration of the bash backend (plugin section ``terminal-bash``)."""

from __future__ import annotations

from typing import Any

import attrs

from dsh_terminal_core.kernel.config import non_empty_str, optional_str, positive_int, str_list

__all__ = ["BashConfig"]

MIB = 1024 * 1024


def _at_most_scrollback(inst: BashConfig, attribute: attrs.Attribute[Any], value: int) -> None:
    positive_int(inst, attribute, value)
    if value > inst.scrollback_max_bytes:
        raise ValueError(
            f"max_read_bytes ({value}) must be <= scrollback_max_bytes "
            f"({inst.scrollback_max_bytes})"
        )


def _at_least_poll(inst: BashConfig, attribute: attrs.Attribute[Any], value: int) -> None:
    positive_int(inst, attribute, value)
    if value < inst.poll_interval_ms:
        raise ValueError(
            f"handoff_grace_ms ({value}) must be >= poll_interval_ms ({inst.poll_interval_ms})"
        )


def _at_least_timeout(inst: BashConfig, attribute: attrs.Attribute[Any], value: int) -> None:
    positive_int(inst, attribute, value)
    if value < inst.timeout_ms:
        raise ValueError(f"max_timeout_ms ({value}) must be >= timeout_ms ({inst.timeout_ms})")


ENVIRONMENTS = ("clean", "login")


def _environment(_inst: BashConfig, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in ENVIRONMENTS:
        raise ValueError(f"environment must be 'clean' or 'login', got {value!r}")


@attrs.frozen(kw_only=True)
class BashConfig:
    """Defaults are the production values; tests assert wait reasons with these."""

    backend_type: str = attrs.field(default="shell", validator=non_empty_str)
    shell_path: str = attrs.field(default="/bin/bash", validator=non_empty_str)
    shell_args: tuple[str, ...] = attrs.field(
        default=("--noprofile", "--norc", "-i"), converter=tuple, validator=str_list
    )
    rows: int = attrs.field(default=40, validator=positive_int)
    cols: int = attrs.field(default=160, validator=positive_int)
    scrollback_lines: int = attrs.field(default=10000, validator=positive_int)
    scrollback_max_bytes: int = attrs.field(default=4 * MIB, validator=positive_int)
    max_read_bytes: int = attrs.field(default=256 * 1024, validator=_at_most_scrollback)
    poll_interval_ms: int = attrs.field(default=50, validator=positive_int)
    exact_probe_after_ms: int = attrs.field(default=150, validator=positive_int)
    idle_silence_ms: int = attrs.field(default=3000, validator=positive_int)
    handoff_grace_ms: int = attrs.field(default=500, validator=_at_least_poll)
    listen_settle_ms: int = attrs.field(default=200, validator=positive_int)
    timeout_ms: int = attrs.field(default=30000, validator=positive_int)
    max_timeout_ms: int = attrs.field(default=600000, validator=_at_least_timeout)
    dispose_grace_ms: int = attrs.field(default=3000, validator=positive_int)
    # SPEC §32.1: "clean" starts every session from the harness's own (scrubbed)
    # environment; "login" adds what the user's login shell ends with, captured once.
    environment: str = attrs.field(default="clean", validator=_environment)
    # None: the user's login shell ($SHELL, else the password database), else shell_path.
    login_shell: str | None = attrs.field(default=None, validator=optional_str)
    login_timeout_ms: int = attrs.field(default=10000, validator=positive_int)
