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

from collections import deque

__all__ = ["TailBuffer", "utf8_head", "utf8_len", "utf8_tail"]

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


class TailBuffer:
    """The last ``max_bytes`` UTF-8 bytes of everything appended, cut on a code point.

    Memory stays below twice the bound: a piece is dropped as soon as the pieces after it
    hold the bound on their own.
    """

    def __init__(self, max_bytes: int) -> None:
        """Create an empty buffer; raises ValueError unless ``max_bytes`` is positive."""
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self._max_bytes = max_bytes
        self._pieces: deque[str] = deque()
        self._sizes: deque[int] = deque()
        self._bytes = 0
        self._truncated = False

    @property
    def truncated(self) -> bool:
        """True once anything appended fell outside the bound."""
        return self._truncated

    def append(self, text: str) -> None:
        """Add text at the end, forgetting whatever no longer fits."""
        if not text:
            return
        size = utf8_len(text)
        if size > self._max_bytes:
            text, _ = utf8_tail(text, self._max_bytes)
            size = utf8_len(text)
            self._pieces.clear()
            self._sizes.clear()
            self._bytes = 0
            self._truncated = True
        self._pieces.append(text)
        self._sizes.append(size)
        self._bytes += size
        while self._bytes - self._sizes[0] >= self._max_bytes:
            self._bytes -= self._sizes.popleft()
            self._pieces.popleft()
            self._truncated = True
        if self._bytes > self._max_bytes:
            self._truncated = True

    def text(self) -> str:
        """Return the retained tail. Costs O(max_bytes); meant for reading, not per chunk."""
        if not self._pieces:
            return ""
        joined = "".join(self._pieces)
        if self._bytes > self._max_bytes:
            joined, _ = utf8_tail(joined, self._max_bytes)
        self._pieces.clear()
        self._sizes.clear()
        self._pieces.append(joined)
        self._bytes = utf8_len(joined)
        self._sizes.append(self._bytes)
        return joined

    def clear(self) -> None:
        """Forget everything, including that anything was truncated."""
        self._pieces.clear()
        self._sizes.clear()
        self._bytes = 0
        self._truncated = False
