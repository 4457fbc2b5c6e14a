"""The secret value and the asker: what every layer may hold without seeing the value.

A :class:`Secret` wraps the value so that no ``repr``, ``str``, f-string or traceback
can print it; only :meth:`Secret.reveal` hands it out, and only the backend's raw write
calls that. A :data:`SecretAsker` asks the person at the client for one (the MCP server
makes one per call, see :mod:`dsh_terminal_core.mcp.secret_page`); the named sources
behind ``ctx.secrets`` live in :mod:`dsh_terminal_core.secrets`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from .errors import DshError

__all__ = ["Secret", "SecretAsk", "SecretAsker", "check_secret_text"]


class Secret:
    """A secret value that never prints itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself; for the one raw write into the terminal."""
        return self._value

    def __repr__(self) -> str:
        return "Secret(<hidden>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> Any:
        raise TypeError("a Secret cannot be pickled")


@attrs.frozen(kw_only=True)
class SecretAsk:
    """What a person is shown when asked: the session, the prompt line, the reason."""

    session_id: str
    prompt: str
    reason: str


SecretAsker = Callable[[SecretAsk], Awaitable[Secret]]
"""Asks the person at the client for one secret; raises ``NO_SECRET``/``SECRET_DECLINED``."""


def check_secret_text(secret: Secret) -> None:
    """Refuse a value that cannot be typed as one line; the message never quotes it."""
    value = secret.reveal()
    if not value:
        raise DshError("the secret is empty; nothing was sent", "INVALID_ARGUMENT")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise DshError(
            "the secret contains a control character (a line break, Ctrl-C, ...) and "
            "cannot be typed as one line; nothing was sent",
            "INVALID_ARGUMENT",
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise DshError(
            "the secret is not valid Unicode; nothing was sent", "INVALID_ARGUMENT"
        ) from None
