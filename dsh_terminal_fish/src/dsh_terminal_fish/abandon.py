"""Takes out of fish's output what its line editor draws for a terminal, not for a reader.

Two things fish prints around every prompt would otherwise reach the text and break the
prompt protocol's "the tail after the marker is exactly the prompt":

* **The abandoned-line mark.** Before each prompt fish prints ``⏎`` (``^J`` without a
  UTF-8 locale), spaces to the width of the terminal, a carriage return, the glyph and
  spaces again, and a carriage return (zsh's ``PROMPT_SP``, which fish cannot turn off).
  On a terminal it shows ``⏎`` after output that did not end its line and nothing otherwise; read as text
  it is a line of spaces overwritten by a glyph. It becomes a line end after output that
  did not end its line, and nothing after one that did.
* **The return before the prompt.** fish starts every paint of its prompt with a
  carriage return, after the marker its ``fish_prompt`` event printed at the start of
  the line, where the return moves nothing; it is dropped, so the text after the marker
  is the prompt itself.

The filter is streaming: a piece that ends inside either pattern is held (at most a
line's width and a few escapes) until the next piece says how it ends.
"""

from __future__ import annotations

import re

__all__ = ["AbandonedLines"]

_GLYPH = rb"(?:\xe2\x8f\x8e|\^J|~)"
_SGR = rb"(?:\x1b\[[0-9;]*m|\x1b\(B)"
_MARK = re.compile(rb"(?:%s)*%s(?:%s)* +\r%s +\r(?:\x1b\[K)?\r*" % (_SGR, _GLYPH, _SGR, _GLYPH))
# A string (OSC: fish's window title) or a control sequence between the marker and the
# return: escapes draw nothing, so the return is still at the start of the line.
_ESCAPE = rb"(?:\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\([0-9A-Za-z])"
# An escape the piece ends inside: a string not yet terminated, a control sequence
# without its final byte, a charset designation without its charset.
_ESCAPE_OPEN = rb"(?:\x1b(?:\][^\x07\x1b]*|\[[0-9;?]*[ -/]*|\()?)"
_MARKER_CR = re.compile(rb"(\x1b\]133;D;[0-9]*\x07(?:%s)*)\r+" % _ESCAPE)

# Where a piece may end inside a pattern: the start of the mark (its glyph, a colour
# before it, or the glyph's first bytes) followed by nothing but what the mark holds;
# or the marker (or its first bytes) followed only by escapes.
_MARK_OPEN = re.compile(
    rb"(?:%s)*(?:\^J?\Z|(?:\xe2(?:\x8f\x8e?)?|~ |\^J )[ \r\x1b\[\]();0-9mBKJ^~\xe2\x8f\x8e]*\Z)"
    % _SGR
)
_MARKER_OPEN = re.compile(
    rb"\x1b(?:\](?:1(?:3(?:3(?:;(?:D(?:;[0-9]*(?:\x07(?:%s)*%s?)?)?)?)?)?)?)?)?\Z"
    % (_ESCAPE, _ESCAPE_OPEN)
)
# A piece ending inside any escape: the glyph's colour may be what it starts.
_TAIL_ESCAPE = re.compile(rb"\x1b(?:\][^\x07\x1b]*|\[[0-9;?]*[ -/]*|\()?\Z")
# Where either pattern can begin: an escape, the glyph's first byte, or the ASCII glyph.
_OPENERS = re.compile(rb"[\x1b\xe2~^]")
_HOLD_SLACK = 128


class AbandonedLines:
    """One session's filter (an :data:`~dsh_terminal_bash.OutputFilter`); ``cols`` is the
    terminal's width, which bounds how much a piece ending inside the mark holds back."""

    __slots__ = ("_at_line_start", "_held", "_limit")

    def __init__(self, cols: int) -> None:
        self._held = b""
        self._limit = cols + _HOLD_SLACK
        self._at_line_start = True

    def __call__(self, data: bytes) -> bytes:
        if self._held:
            data, self._held = self._held + data, b""
        if b"\r" in data:
            if b"\x1b]133;D;" in data:
                data = _MARKER_CR.sub(rb"\1", data)
            data = _MARK.sub(self._replace, data)
        data = self._hold_open(data)
        ends = _ends_line(data)
        if ends is not None:
            self._at_line_start = ends
        return data

    def _replace(self, found: re.Match[bytes]) -> bytes:
        ends = _ends_line(found.string[max(found.start() - self._limit, 0) : found.start()])
        at_start = self._at_line_start if ends is None else ends
        return b"" if at_start else b"\n"

    def _hold_open(self, data: bytes) -> bytes:
        """Keep back a tail that may be the start of a pattern the next piece completes:
        from the earliest place within the last line's width where one could begin."""
        window = max(len(data) - self._limit, 0)
        starts = _OPENERS.finditer(data, window)
        for found in starts:
            at = found.start()
            if (
                _MARK_OPEN.match(data, at)
                or _MARKER_OPEN.match(data, at)
                or _TAIL_ESCAPE.match(data, at)
            ):
                self._held = data[at:]
                return data[:at]
        return data


_TRAILING_ESCAPES = re.compile(rb"(?:%s)+\Z" % _ESCAPE)


def _ends_line(text: bytes) -> bool | None:
    """Whether ``text`` leaves the cursor at the start of a line (escapes draw nothing);
    None when it holds nothing but escapes."""
    if text.endswith(b"\n"):
        return True
    if not text.endswith((b"m", b"\x07", b"\\", b"B", b"K")):
        return False if text else None
    bare = _TRAILING_ESCAPES.sub(b"", text[-_HOLD_SLACK:])
    return bare.endswith(b"\n") if bare else None
