"""Shell quoting for the ``env`` of ``pty_open``.

The export line is typed into an interactive shell on a terminal, so it passes through
two interpreters before the shell parses it: the terminal line discipline and the line
editor (readline). Both act on control characters — a tab completes, ESC starts a key
sequence, Ctrl-C interrupts, Ctrl-U erases the line — so only text made of printable
characters and newlines can travel inside POSIX single quotes. A value holding any other
control character is written in ANSI-C ``$'...'`` form with octal escapes instead, which
bash, zsh, ksh and POSIX.1-2024 shells read back byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from dsh_terminal_core.kernel.errors import InvalidArgument

__all__ = ["export_line", "quote"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

# C0 controls except newline, DEL, and the C1 range: what a terminal or line editor may
# act on. A newline inside single quotes only continues the command on the next line.
_NEEDS_ANSI_C = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")

_ANSI_C_NAMED = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(value: str) -> str:
    """Quote ``value`` so a shell reading it from a terminal gets it back exactly.

    Printable text and newlines are single-quoted (``'`` itself becomes ``'\\''``: close,
    escaped quote, reopen), so ``$``, backticks, backslashes, double quotes and spaces
    stay literal. Text with other control characters uses ``$'...'`` with every
    control character as an octal escape of its UTF-8 bytes, so no raw control byte
    reaches the terminal.
    """
    if _NEEDS_ANSI_C.search(value) is None:
        return "'" + value.replace("'", "'\\''") + "'"
    return "$'" + "".join(_ansi_c_char(ch) for ch in value) + "'"


def _ansi_c_char(ch: str) -> str:
    named = _ANSI_C_NAMED.get(ch)
    if named is not None:
        return named
    if _NEEDS_ANSI_C.match(ch):
        return "".join(f"\\{byte:03o}" for byte in ch.encode("utf-8"))
    return ch


def export_line(env: Mapping[str, str]) -> str:
    """Return one ``export NAME='value' ...`` command for ``env``.

    Raises :class:`InvalidArgument` — before anything is built, so a caller can reject
    the request with nothing sent — for a name that is not a shell identifier, a value
    that is not a string, a NUL byte (no C string, hence no environment, can hold one),
    or text that is not encodable as UTF-8 (a lone surrogate).
    """
    if not env:
        raise InvalidArgument("env must hold at least one variable to export")
    parts = []
    for name, value in env.items():
        if not isinstance(name, str) or not _IDENTIFIER.match(name):
            raise InvalidArgument(
                f"env name {name!r} is not a valid shell identifier "
                "(letters, digits and '_', not starting with a digit)"
            )
        if not isinstance(value, str):
            raise InvalidArgument(f"env value of {name} must be a string")
        if "\0" in value:
            raise InvalidArgument(
                f"env value of {name} contains a NUL byte, which no environment variable can hold"
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidArgument(f"env value of {name} is not valid Unicode text: {exc}") from exc
        parts.append(f"{name}={quote(value)}")
    return "export " + " ".join(parts)
