"""UTF-8 byte bounds for text, cut on code point boundaries.

Every text that crosses a byte budget (scrollback, viewports, tool results) must stay
valid UTF-8 after the cut, so these helpers never split a code point. They encode at most
the part of the text that can matter (a budget of ``n`` bytes never needs more than ``n``
code points) and find the boundary by stepping over at most three continuation bytes, so a
small cut of a huge text costs O(budget), not O(text).

Lone surrogates are counted and carried with ``surrogatepass`` rather than raising: a
bound must never be the thing that fails.
"""

from __future__ import annotations

__all__ = ["utf8_head", "utf8_len", "utf8_tail"]

_ENCODING = "utf-8"
_ERRORS = "surrogatepass"


def utf8_len(text: str) -> int:
    """Return the UTF-8 size of ``text`` in bytes; O(1) for ASCII text."""
    if text.isascii():
        return len(text)
    return len(text.encode(_ENCODING, _ERRORS))


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def utf8_head(text: str, max_bytes: int) -> tuple[str, bool]:
    """Return the longest prefix of ``text`` within ``max_bytes`` UTF-8 bytes, and whether it cut.

    The prefix ends on a code point boundary, so it may be up to three bytes shorter than
    the budget. A negative budget counts as zero.
    """
    max_bytes = max(max_bytes, 0)
    if len(text) <= max_bytes and (text.isascii() or len(text) * 4 <= max_bytes):
        return text, False
    if text.isascii():
        return text[:max_bytes], True
    # No more than max_bytes code points can fit, so never encode more than that.
    window = text[:max_bytes]
    data = window.encode(_ENCODING, _ERRORS)
    if len(data) <= max_bytes:
        return window, len(window) < len(text)
    cut = max_bytes
    while cut > 0 and _is_continuation(data[cut]):
        cut -= 1
    return data[:cut].decode(_ENCODING, _ERRORS), True


def utf8_tail(text: str, max_bytes: int) -> tuple[str, bool]:
    """Return the longest suffix of ``text`` within ``max_bytes`` UTF-8 bytes, and whether it cut.

    The suffix starts on a code point boundary, so it may be up to three bytes shorter
    than the budget. A negative budget counts as zero.
    """
    max_bytes = max(max_bytes, 0)
    if len(text) <= max_bytes and (text.isascii() or len(text) * 4 <= max_bytes):
        return text, False
    if text.isascii():
        return (text[-max_bytes:] if max_bytes else ""), True
    window = text[-max_bytes:] if max_bytes else ""
    data = window.encode(_ENCODING, _ERRORS)
    if len(data) <= max_bytes:
        return window, len(window) < len(text)
    start = len(data) - max_bytes
    while start < len(data) and _is_continuation(data[start]):
        start += 1
    return data[start:].decode(_ENCODING, _ERRORS), True
