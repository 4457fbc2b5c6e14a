"""Waiting for a line: one pattern rule and one matcher for every "come back when X prints".

``terminal_send``'s ``waitFor`` and ``ctx.pty.wait`` answer the same question — has a
complete line of output matched this regular expression yet? — and must answer it the
same way: the same syntax and bounds for the pattern, the same errors, the same notion of
a line (backspaces applied as a terminal shows them, no newline), ``search`` semantics.
This module is that one answer.

:class:`LineMatcher` is fed a stream of sanitized text in pieces and reports the first
complete line that matches, with its absolute 1-based line number (as ``terminal_read``
counts) and where in the piece that line ended, so a caller can stop collecting output
right after it. Lines that are the terminal's echo of the typed input are not output and
never match: otherwise ``waitFor: "Listening on"`` would match the command line that
prints it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TypedDict

import attrs

from ..kernel.errors import InvalidArgument
from .overstrike import render as displayed

__all__ = [
    "MAX_PATTERN_CHARS",
    "LineMatch",
    "LineMatchValue",
    "LineMatcher",
    "compile_line_pattern",
]

MAX_PATTERN_CHARS = 1000
"""Longest pattern accepted: a line-matching expression, not a program."""

_PARTIAL_MAX_CHARS = 64 * 1024
"""How much of a line still being written is kept for matching; a longer line is matched
on its last part (its start is in the scrollback)."""


def compile_line_pattern(pattern: str | re.Pattern[str], what: str = "pattern") -> re.Pattern[str]:
    """``pattern`` compiled (Python ``re`` syntax), or ``INVALID_ARGUMENT`` saying why not.

    ``what`` names the argument in the message (``waitFor``, ``pattern``).
    """
    if isinstance(pattern, re.Pattern):
        if not isinstance(pattern.pattern, str):
            raise InvalidArgument(f"{what} must be a str regular expression, not bytes")
        source = pattern.pattern
    elif isinstance(pattern, str):
        source = pattern
    else:
        raise InvalidArgument(f"{what} must be a regular expression string")
    if not source:
        raise InvalidArgument(f"{what} must not be empty: it would match every line")
    if len(source) > MAX_PATTERN_CHARS:
        raise InvalidArgument(
            f"{what} is {len(source)} characters long; at most {MAX_PATTERN_CHARS} are allowed"
        )
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(source)
    except re.error as exc:
        raise InvalidArgument(f"{what} is not a valid regular expression: {exc}") from exc


class LineMatchValue(TypedDict):
    """The wire form of a :class:`LineMatch`."""

    line: str
    lineNumber: int


@attrs.frozen(kw_only=True)
class LineMatch:
    """The line that matched, as shown, and its absolute line number (from 1)."""

    line: str
    line_number: int

    def to_wire(self) -> LineMatchValue:
        return {"line": self.line, "lineNumber": self.line_number}


class LineMatcher:
    """Finds the first complete output line matching ``pattern`` in a stream of text.

    ``echoes`` are the lines of the typed input: the first line equal to one of them
    (bare, or behind ``prompts``, e.g. the shell's ``PS1`` and ``PS2``) is the
    terminal's echo of that input, consumed once each, in order, and never matched.
    Not thread-safe; one matcher per wait.
    """

    def __init__(
        self,
        pattern: re.Pattern[str],
        *,
        echoes: Iterable[str] = (),
        prompts: Iterable[str] = (),
    ) -> None:
        self._pattern = pattern
        self._echoes = [line for line in echoes if line]
        self._prompts = tuple(prompt for prompt in prompts if prompt)
        self._partial: list[str] = []
        self._partial_chars = 0
        self._completed = 0  # complete lines seen so far
        self.matched: LineMatch | None = None

    @property
    def pattern(self) -> re.Pattern[str]:
        return self._pattern

    def matches(self, line: str) -> bool:
        """``line`` (one line, no newline) matches, as a terminal shows it."""
        return self._pattern.search(displayed(line)) is not None

    def feed(self, text: str, first_line: int) -> int | None:
        """Look at the next piece; returns where in ``text`` the matching line ended.

        ``first_line`` is the 0-based scrollback number of the line the stream started
        on. Returns None while nothing matched; after a match, :attr:`matched` holds it
        and further pieces are ignored.
        """
        if self.matched is not None or not text:
            return None
        start = 0
        while True:
            newline = text.find("\n", start)
            if newline < 0:
                self._keep_partial(text[start:])
                return None
            piece = text[start:newline]
            if self._partial:
                self._partial.append(piece)
                line = "".join(self._partial)
                self._partial.clear()
                self._partial_chars = 0
            else:
                line = piece
            number = first_line + self._completed + 1
            self._completed += 1
            start = newline + 1
            if self._is_echo(line):
                continue
            if self.matches(line):
                self.matched = LineMatch(line=displayed(line), line_number=number)
                return start

    def _keep_partial(self, piece: str) -> None:
        if not piece:
            return
        self._partial.append(piece)
        self._partial_chars += len(piece)
        if self._partial_chars > _PARTIAL_MAX_CHARS:
            kept = "".join(self._partial)[-_PARTIAL_MAX_CHARS:]
            self._partial = [kept]
            self._partial_chars = len(kept)

    def _is_echo(self, line: str) -> bool:
        if not self._echoes:
            return False
        expected = self._echoes[0]
        shown = displayed(line)
        if shown == expected or any(shown == prompt + expected for prompt in self._prompts):
            self._echoes.pop(0)
            return True
        return False
