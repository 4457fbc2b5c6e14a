"""The visible screen of a screen session, emulated by libghostty-vt.

Full-screen programs (vim, less, top, dialog, fzf) draw with cursor addressing; their
output read as a stream is noise, so a screen session feeds every byte into an emulator
and shows the model what a person would see. The emulator is Ghostty's core (chosen by
measurement over pyte and avt: docs/screens.md); this module adds what a session needs
around it:

- the terminal's answers to the program's queries (cursor position, device attributes,
  colours, sizes, modes) come back from :meth:`ScreenEmulator.feed`, in the order the
  queries were asked, for the session to write to the program at once;
- whether the program addressed the cursor (the output is a drawn screen, not lines);
- highlighted runs (inverse, or a background colour on a row or two) so focus and
  selection shown only by colour are readable;
- an output path that never raises: a failing emulator is rebuilt from the output kept
  since the last full reset (:data:`_RETAINED_BYTES` at most) and the session goes on.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

from dsh_terminal_core.registry import Highlight, ScreenView

from .vt import Cell, VtTerminal

__all__ = ["ScreenEmulator"]

_log = logging.getLogger(__name__)

_T = TypeVar("_T")

# Cursor addressing marks output as drawn for a screen: CUP/HVP with a position, CUU, VPA,
# and erasing the whole display. (Bare ``CSI H`` alone is what a shell's ``clear``
# prints together with ``CSI 2J``, which counts.)
_ADDRESSING = re.compile(rb"\x1b\[(?:[0-9;]+[Hf]|[0-9]*[Ad]|[23]J)")
# DECXCPR, the extended cursor position report libghostty-vt does not answer.
_DECXCPR = re.compile(rb"\x1b\[\?6n")
# A suffix that may still become one of the sequences above (carried to the next chunk).
_OPEN_SEQUENCE = re.compile(rb"\x1b(?:\[[0-9;?]*)?\Z")
_MAX_CARRY = 16

# The raw output kept to rebuild a failed emulator: more than a full colour redraw of a
# large screen, bounded so a thousand sessions keep at most 64 MiB for it.
_RETAINED_BYTES = 64 * 1024
# Full resets (RIS) and entering the alternate screen start a screen afresh: output before
# them cannot show after them, so the retained output starts there.
_FRESH_START = re.compile(rb"\x1bc|\x1b\[\?(?:1049|1047|47)h")

# A coloured background covering more rows than this is a window or panel, not a mark.
_MAX_MARK_ROWS = 2
# Blank cells of another style that may separate two parts of one marked run.
_MAX_GAP = 2


class ScreenEmulator:
    """Feed raw PTY output in; read the visible screen out at any time."""

    def __init__(self, rows: int, cols: int) -> None:
        self._replies = bytearray()
        self._vt = VtTerminal(rows, cols, self._replies.extend)
        self._drawn = False
        self._carry = b""
        self._retained = bytearray()
        self._rebuilds = 0

    @property
    def rows(self) -> int:
        return self._vt.rows

    @property
    def cols(self) -> int:
        return self._vt.cols

    @property
    def alternate(self) -> bool:
        return self._guard(lambda: self._vt.alternate, False)

    @property
    def rebuilds(self) -> int:
        """How many times a failing emulator was rebuilt (0 in any healthy session)."""
        return self._rebuilds

    def feed(self, data: bytes) -> bytes:
        """Emulate ``data``; return the terminal's replies to queries in it (often b"").

        Never raises: an emulator that fails is replaced by one rebuilt from the retained
        output before ``data``, and ``data`` is dropped from the screen (it stays in the
        session's scrollback).
        """
        scan = self._carry + data if self._carry else data
        if b"\x1b" in scan:
            if not self._drawn and _ADDRESSING.search(scan):
                self._drawn = True
            tail = scan.rfind(b"\x1b")
            self._carry = (
                scan[tail:]
                if len(scan) - tail <= _MAX_CARRY and _OPEN_SEQUENCE.match(scan, tail)
                else b""
            )
        else:
            self._carry = b""
        try:
            if b"?6n" in scan:
                self._feed_with_decxcpr(data, scan)
            else:
                self._vt.feed(data)
        except Exception:
            _log.warning("screen emulator failed; rebuilding it", exc_info=True)
            self._rebuild()
            return b""
        self._retain(data)
        if not self._replies:
            return b""
        replies = bytes(self._replies)
        self._replies.clear()
        return replies

    def _feed_with_decxcpr(self, data: bytes, scan: bytes) -> None:
        """Feed ``data`` piecewise, answering each ``CSI ? 6 n`` where it was asked."""
        offset = len(scan) - len(data)  # the carried bytes were already fed
        start = 0
        for match in _DECXCPR.finditer(scan):
            end = match.end() - offset
            self._vt.feed(data[start:end])
            start = end
            row, col = self._vt.cursor
            self._replies += b"\x1b[?%d;%d;1R" % (row + 1, col + 1)
        self._vt.feed(data[start:])

    def _retain(self, data: bytes) -> None:
        fresh = max((found.start() for found in _FRESH_START.finditer(data)), default=-1)
        if fresh >= 0:
            self._retained[:] = data[fresh:]
        else:
            self._retained += data
        excess = len(self._retained) - _RETAINED_BYTES
        if excess > 0:
            # Cut at a line start so the rebuilt screen begins between lines.
            cut = self._retained.find(b"\n", excess)
            del self._retained[: cut + 1 if cut >= 0 else excess]

    def _rebuild(self) -> None:
        """Replace the emulator with one that replayed the retained output (replies
        dropped: those queries were answered when they were asked)."""
        self._rebuilds += 1
        rows, cols = self._vt.rows, self._vt.cols
        try:
            self._vt.close()
        except Exception:
            _log.debug("closing the failed emulator failed", exc_info=True)
        self._carry = b""
        try:
            self._vt = VtTerminal(rows, cols, self._replies.extend)
            self._vt.feed(bytes(self._retained))
        except Exception:
            _log.warning("replaying the retained output failed; the screen starts blank")
            self._retained.clear()
            self._vt = VtTerminal(rows, cols, self._replies.extend)
        self._replies.clear()

    def _guard(self, read: Callable[[], _T], fallback: _T) -> _T:
        """Read the emulator's state; rebuild it and read again if that fails."""
        try:
            return read()
        except Exception:
            _log.warning("reading the screen emulator failed; rebuilding it", exc_info=True)
            self._rebuild()
        try:
            return read()
        except Exception:
            _log.warning("the rebuilt screen emulator failed too", exc_info=True)
            return fallback

    def resize(self, rows: int, cols: int) -> None:
        def apply() -> None:
            self._vt.resize(rows, cols)

        self._guard(apply, None)
        if (self._vt.rows, self._vt.cols) != (rows, cols):  # the rebuilt one lost it
            self._vt = VtTerminal(rows, cols, self._replies.extend)

    def take_drawn(self) -> bool:
        """True if the program addressed the cursor since the last call; clears the flag."""
        drawn, self._drawn = self._drawn, False
        return drawn

    def snapshot(self) -> ScreenView:
        """The visible screen: text trimmed, the cursor, the screen shown, highlights."""
        blank = ScreenView(text="", cursor=(0, 0), alternate=False)
        return self._guard(self._snapshot, blank)

    def _snapshot(self) -> ScreenView:
        vt = self._vt
        lines = vt.lines()
        styled = list(vt.styled_rows())
        cursor = vt.cursor
        last = len(lines)
        while last > cursor[0] + 1 and not lines[last - 1]:
            last -= 1
        return ScreenView(
            text="\n".join(lines[:last]),
            cursor=cursor,
            alternate=vt.alternate,
            highlights=_highlights(styled),
        )


_Colour = tuple[str, int] | None


def _highlights(styled: list[tuple[int, list[Cell]]]) -> tuple[Highlight, ...]:
    """Runs of cells a person would see as marked: a selected item, a focused button.

    A run of cells sharing a background is marked when it is inverse video, or when its
    background differs from the cells on both sides of it and every style in it (colours
    and inverse) appears on at most :data:`_MAX_MARK_ROWS` rows of the screen: a window,
    a panel or the screen's own background spans more rows and marks nothing, and a
    foreground colour alone (a hotkey letter, a title) marks nothing either. Marked runs
    with at most :data:`_MAX_GAP` blank cells between them are one (``<  OK  >``); blank
    runs (a shadow) are dropped.
    """
    rows_of: dict[tuple[bool, _Colour, _Colour], set[int]] = defaultdict(set)
    for row, cells in styled:
        for cell in cells:
            rows_of[(cell.inverse, cell.fg, cell.bg)].add(row)
    found: list[Highlight] = []
    for row, cells in styled:
        bg_at = {cell.col: (cell.inverse, cell.bg) for cell in cells}
        run: list[Cell] = []
        gap: list[Cell] = []  # blank cells after the run, kept if the run goes on
        for segment in _segments(cells):
            first, last = segment[0], segment[-1]
            ground = (first.inverse, first.bg)
            marked = first.inverse or (
                first.bg is not None
                and bg_at.get(first.col - 1, (False, None)) != ground
                and bg_at.get(last.col + 1, (False, None)) != ground
                and all(
                    len(rows_of[(cell.inverse, cell.fg, cell.bg)]) <= _MAX_MARK_ROWS
                    for cell in segment
                )
            )
            contiguous = bool(run) and (gap[-1] if gap else run[-1]).col + 1 == first.col
            if marked:
                if contiguous:
                    run += gap
                    run += segment
                else:
                    _close_run(row, run, found)
                    run = list(segment)
                gap = []
            elif (
                contiguous
                and len(gap) + len(segment) <= _MAX_GAP
                and not "".join(cell.text for cell in segment).strip()
            ):
                gap += segment
            else:
                _close_run(row, run, found)
                run, gap = [], []
        _close_run(row, run, found)
    return tuple(found)


def _segments(cells: list[Cell]) -> list[list[Cell]]:
    """Consecutive cells sharing inverse video and a background, left to right."""
    segments: list[list[Cell]] = []
    for cell in cells:
        if segments:
            previous = segments[-1][-1]
            if previous.col + 1 == cell.col and (previous.inverse, previous.bg) == (
                cell.inverse,
                cell.bg,
            ):
                segments[-1].append(cell)
                continue
        segments.append([cell])
    return segments


def _close_run(row: int, run: list[Cell], found: list[Highlight]) -> None:
    if not run:
        return
    text = "".join(cell.text for cell in run)
    stripped = text.lstrip()
    if not stripped.strip():
        return
    lead = len(text) - len(stripped)
    # Leading blanks are one cell each, so the first character's column is exact.
    found.append(Highlight(row=row, col=run[0].col + lead, text=stripped.rstrip()))
