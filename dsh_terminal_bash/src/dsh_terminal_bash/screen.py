"""The visible screen of a screen session: a ``pyte`` emulator with an alternate screen.

Full-screen programs (vim, less, top, dialog) draw with cursor addressing; their output
read as a stream is noise, so a screen session feeds every byte into an emulator and shows
the model what a person would see. ``pyte`` has no alternate screen, which every one of
those programs uses (DECSET 1049, 1047 or 47), so :class:`_Screen` adds it: entering keeps
the primary screen aside (with the cursor, for 1049) and shows a blank one; leaving puts
the primary screen back exactly as it was, so the shell's lines reappear after ``:q``.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from typing import Any

import pyte
from pyte.screens import Char, Cursor, StaticDefaultDict

from dsh_terminal_core.registry import ScreenView

__all__ = ["ScreenEmulator"]

_log = logging.getLogger(__name__)

# Output that can only write lines and scroll: text, CR/LF/BS/TAB, colours (SGR) and
# erase-in-line. Anything else (cursor addressing, reverse index, charset shifts, modes)
# can reach back to earlier lines, so a chunk holding it is fed whole.
_NOT_PLAIN = re.compile(rb"\x1b(?!\[[0-9;]*[mK])|[\x0e\x0f]")

_SAVES_CURSOR = 1049
_ALTERNATE = frozenset({47, 1047, 1049})

# Output is emulated lazily, in pieces of up to this size: the bigger the piece, the more
# of a bulk stream is recognised as scrolled off unseen (see ``_scrolled_off``).
_FLUSH_BYTES = 256 * 1024

_Buffer = dict[int, StaticDefaultDict[int, Char]]


def _plain_tail_start(data: bytes) -> int:
    """Start of the line after the last sequence that is not plain (0: none before the
    last line feed). Searching backwards keeps this cheap for colourful output."""
    last_lf = data.rfind(b"\n")
    if last_lf < 0:
        return 0
    found = max(data.rfind(b"\x0e", 0, last_lf), data.rfind(b"\x0f", 0, last_lf))
    escape = last_lf
    while True:
        escape = data.rfind(b"\x1b", 0, escape)
        if escape < 0 or escape < found:
            break
        if _NOT_PLAIN.match(data, escape):
            found = escape
            break
    if found < 0:
        return 0
    return data.find(b"\n", found) + 1


class _Screen(pyte.Screen):
    """``pyte.Screen`` plus the alternate screen and a "the cursor was addressed" flag."""

    def __init__(self, columns: int, lines: int) -> None:
        self.alternate = False
        self.addressed = False
        self._primary: _Buffer | None = None
        self._primary_cursor: Cursor | None = None
        super().__init__(columns, lines)

    def _blank_buffer(self) -> _Buffer:
        return defaultdict(lambda: StaticDefaultDict[int, Char](self.default_char))

    def set_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            chosen = _ALTERNATE.intersection(modes)
            if chosen:
                self._enter_alternate(max(chosen))
            modes = tuple(mode for mode in modes if mode not in _ALTERNATE)
        super().set_mode(*modes, **kwargs)

    def reset_mode(self, *modes: int, **kwargs: Any) -> None:
        if kwargs.get("private"):
            chosen = _ALTERNATE.intersection(modes)
            if chosen:
                self._leave_alternate(max(chosen))
            modes = tuple(mode for mode in modes if mode not in _ALTERNATE)
        super().reset_mode(*modes, **kwargs)

    def _enter_alternate(self, mode: int) -> None:
        if self.alternate:
            return
        self.alternate = True
        self._primary = self.buffer
        self._primary_cursor = (
            Cursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
            if mode == _SAVES_CURSOR
            else None
        )
        # Mode 47 would show the alternate buffer as last left; ours always starts blank,
        # which every program using it draws over anyway.
        self.buffer = self._blank_buffer()
        self.dirty.update(range(self.lines))

    def _leave_alternate(self, mode: int) -> None:
        if not self.alternate:
            return
        self.alternate = False
        primary = self._primary if self._primary is not None else self._blank_buffer()
        # A resize while on the alternate screen changed the size under the saved lines.
        for row in [row for row in primary if row >= self.lines]:
            del primary[row]
        for line in primary.values():
            for col in [col for col in line if col >= self.columns]:
                del line[col]
        self.buffer = primary
        self._primary = None
        saved = self._primary_cursor
        if saved is not None and mode == _SAVES_CURSOR:
            self.cursor.x = min(saved.x, self.columns - 1)
            self.cursor.y = min(saved.y, self.lines - 1)
            self.cursor.attrs = saved.attrs
        self._primary_cursor = None
        self.dirty.update(range(self.lines))

    def reset(self) -> None:
        super().reset()
        self.alternate = False
        self._primary = None
        self._primary_cursor = None

    # pyte passes ``private=True`` for any ``CSI ? ...`` sequence, which these handlers do
    # not take; xterm uses them for queries and settings that change nothing visible
    # (``CSI ? Pp m``, ``CSI ? 6 n``, ``CSI ? r``), so they are ignored here.
    def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
        if not private:
            super().select_graphic_rendition(*attrs)

    def report_device_status(self, mode: int = 0, private: bool = False) -> None:
        if not private:
            super().report_device_status(mode)

    def set_margins(
        self, top: int | None = None, bottom: int | None = None, private: bool = False
    ) -> None:
        if not private:
            super().set_margins(top, bottom)

    # Cursor addressing marks the output as drawn for a screen, not a stream of lines.
    def cursor_position(self, line: int | None = None, column: int | None = None) -> None:
        if line is not None or column is not None:
            self.addressed = True
        super().cursor_position(line, column)

    def cursor_up(self, count: int | None = None) -> None:
        self.addressed = True
        super().cursor_up(count)

    def cursor_to_line(self, line: int | None = None) -> None:
        self.addressed = True
        super().cursor_to_line(line)

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        if how in (2, 3):
            self.addressed = True
        super().erase_in_display(how, *args, **kwargs)


class ScreenEmulator:
    """Feed raw PTY output in; read the visible screen out at any time."""

    def __init__(self, rows: int, cols: int) -> None:
        self._screen = _Screen(cols, rows)
        self._stream = pyte.ByteStream(self._screen)
        self._pending = bytearray()

    @property
    def rows(self) -> int:
        return int(self._screen.lines)

    @property
    def cols(self) -> int:
        return int(self._screen.columns)

    @property
    def alternate(self) -> bool:
        self._flush()
        return bool(self._screen.alternate)

    def feed(self, data: bytes) -> None:
        """Take output; it is emulated when the screen is next looked at (or in bulk)."""
        self._pending += data
        if len(self._pending) >= _FLUSH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        data = bytes(self._pending)
        self._pending.clear()
        # Emulate up to the line after the last sequence that is not plain (a command's
        # echo, a prompt's marker): what follows it is plain lines, which may scroll off.
        plain_from = _plain_tail_start(data)
        if plain_from:
            self._feed(data[:plain_from])
            data = data[plain_from:]
        start = self._scrolled_off(data)
        if start:
            # Everything before ``start`` is off the screen by the end of the chunk; the
            # screen at the cut is blank rows with the cursor at the start of the bottom
            # row, whatever came before. A character split across the cut is dropped with
            # the skipped part.
            screen = self._screen
            screen.buffer.clear()
            screen.dirty.update(range(screen.lines))
            screen.cursor.y = screen.lines - 1
            screen.cursor.x = 0
            self._stream.utf8_decoder.reset()
            data = data[start:]
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        try:
            self._stream.feed(data)
        except Exception:  # a sequence pyte cannot take must not stop the session's output
            _log.debug("screen emulator skipped the rest of a chunk", exc_info=True)

    def _scrolled_off(self, data: bytes) -> int:
        """Where the part of ``data`` that can still be visible afterwards begins (0: all).

        Bulk output (a build log, ``cat`` of a big file) is mostly lines that scroll past;
        emulating each one costs far more than the PTY took to deliver it. When the chunk
        can only write lines and scroll, on the primary screen without a scroll region,
        with the emulator between sequences, and holds at least ``2 * rows`` line feeds
        (only what follows the last one may be anything), then at the CR LF that leaves
        ``rows`` line feeds after it the cursor is on the bottom row, column 0, of a blank
        line (``rows`` line feeds before it reached the bottom and the last one scrolled),
        and the ``rows`` line feeds after it push every line above out of view.
        """
        screen = self._screen
        rows = screen.lines
        if (
            screen.alternate
            or screen.margins is not None
            or not self._stream._taking_plain_text
            or data.count(b"\n") < 2 * rows
        ):
            return 0
        # Past the last line feed both states are the same whatever follows, and a
        # sequence split at the chunk's end must not spoil the fast path.
        last_lf = data.rfind(b"\n")
        if _NOT_PLAIN.search(data, 0, last_lf):
            return 0
        cut = len(data)
        for _ in range(rows + 1):
            cut = data.rfind(b"\n", 0, cut)
        # ``cut`` is the LF with ``rows`` LFs after it; it must end a CR LF (column 0).
        if cut <= 0 or data[cut - 1] != 0x0D:
            return 0
        return cut + 1

    def resize(self, rows: int, cols: int) -> None:
        self._flush()
        self._screen.resize(rows, cols)

    def take_drawn(self) -> bool:
        """True if the program addressed the cursor since the last call; clears the flag."""
        self._flush()
        drawn = bool(self._screen.addressed)
        self._screen.addressed = False
        return drawn

    def snapshot(self) -> ScreenView:
        self._flush()
        screen = self._screen
        lines = [line.rstrip() for line in screen.display]
        cursor = (int(screen.cursor.y), int(screen.cursor.x))
        last = len(lines)
        while last > cursor[0] + 1 and not lines[last - 1]:
            last -= 1
        return ScreenView(
            text="\n".join(lines[:last]), cursor=cursor, alternate=bool(screen.alternate)
        )
