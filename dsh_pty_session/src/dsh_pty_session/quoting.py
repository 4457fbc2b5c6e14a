"""POSIX shell quoting for the ``env`` of ``pty_open``."""

from __future__ import annotations

import re
from collections.abc import Mapping

from dsh_terminal_core.errors import InvalidArgument

__all__ = ["export_line", "quote"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def quote(value: str) -> str:
    """Single-quote ``value`` so any POSIX shell reads it back byte for byte.

    Inside single quotes nothing is special except the quote itself, which is written
    as ``'\\''`` (close, escaped quote, reopen). Newlines, ``$``, backticks and spaces
    survive as they are.
    """
    return "'" + value.replace("'", "'\\''") + "'"


def export_line(env: Mapping[str, str]) -> str:
    """One ``export NAME='value' ...`` command; rejects bad names and NUL bytes first."""
    parts = []
    for name, value in env.items():
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise InvalidArgument(f"env name {name!r} is not a valid shell identifier")
        if not isinstance(value, str):
            raise InvalidArgument(f"env value of {name} must be a string")
        if "\0" in value:
            raise InvalidArgument(f"env value of {name} contains a NUL byte, which no shell can hold")
        parts.append(f"{name}={quote(value)}")
    return "export " + " ".join(parts)
