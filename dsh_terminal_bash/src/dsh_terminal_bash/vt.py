"""A thin, typed layer over libghostty-vt (through ``pyghostty``'s raw cffi bindings).

Ghostty's terminal core is the reference emulator screen sessions are measured against
(docs/screens.md), so screen sessions use it directly instead of approximating it. This
module is the only one that touches the C API: it owns the native terminal and the
callbacks the library calls back into (replies to the program's queries, the window size
in pixels for ``CSI 14t``), and hands out plain Python values — rows of text, the cursor,
which screen is active, and the styled cells of a row.

``pyghostty.core.Terminal`` covers text and the cursor but not the size report or the
per-cell walk, and reaches for private handles to do more; the raw ``ffi``/``lib`` it
exports are the complete, public C API, which is what is used here.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import attrs
from cffi import FFI
from pyghostty import ffi, lib

__all__ = ["CELL_PX", "DEFAULT_COLORS", "Cell", "VtError", "VtTerminal"]

#: The cell size in pixels reported to ``CSI 14t`` / ``CSI 16t`` (a common 8x16 font).
CELL_PX = (8, 16)

#: The default foreground, background and cursor colours programs read with OSC 10, 11 and
#: 12: light grey on black, the dark theme most terminals ship with, so a program that
#: picks its palette by the background's luminance picks its dark variant.
DEFAULT_COLORS = ((0xE5, 0xE5, 0xE5), (0x00, 0x00, 0x00), (0xE5, 0xE5, 0xE5))

# Replies withheld from the program: a kitty keyboard protocol report (``CSI ? flags u``)
# would make a program switch to key encodings the session's named keys do not send.
_WITHHELD_REPLY = re.compile(rb"\x1b\[\?[0-9]*u")


# DEC private mode 2027 as ``GhosttyMode`` packs it (the mode number; bit 15 clear: DEC).
_GRAPHEME_CLUSTERING = 2027


# Bound once at import: cffi resolves a library attribute lazily under a lock it does not
# re-enter, and a finalizer run by garbage collection in the middle of such a lookup must
# not look anything up itself (that deadlocks).
_terminal_free = lib.ghostty_terminal_free

# cffi's ABI mode cannot pass a union by value, and ``ghostty_terminal_grid_ref`` takes a
# ``GhosttyPoint`` (a tag and a union) so. A struct of the same size and alignment has the
# same calling convention on x86-64 and arm64 (both pass it in memory), so the function
# is called through a pointer cast to take that struct instead.
_twin = FFI()
_twin.include(ffi)
_twin.cdef(
    "typedef struct { uint16_t x; uint32_t y; uint64_t pad; } DshPointValue;"
    "typedef struct { GhosttyPointTag tag; DshPointValue value; } DshPoint;"
)
if (_twin.sizeof("DshPoint"), _twin.alignof("DshPoint")) != (
    ffi.sizeof("GhosttyPoint"),
    ffi.alignof("GhosttyPoint"),
):
    raise ImportError("libghostty-vt's GhosttyPoint changed shape; update dsh_terminal_bash/vt.py")
_grid_ref = _twin.cast(
    "GhosttyResult(*)(GhosttyTerminal, DshPoint, GhosttyGridRef*)",
    ffi.addressof(lib, "ghostty_terminal_grid_ref"),
)


class VtError(RuntimeError):
    """The native terminal refused an operation (a non-zero ``GhosttyResult``)."""


def _check(result: int, what: str) -> None:
    if result != lib.GHOSTTY_SUCCESS:
        raise VtError(f"libghostty-vt {what} failed: {result}")


@attrs.frozen
class Cell:
    """One styled cell of a row: its column, its text ('' for the tail of a wide
    character) and the attributes that set it apart from plain text."""

    col: int
    text: str
    inverse: bool
    bold: bool
    underline: bool
    fg: tuple[str, int] | None
    bg: tuple[str, int] | None


def _colour(colour: Any) -> tuple[str, int] | None:
    """A style colour as ``("palette", n)``, ``("rgb", 0xRRGGBB)`` or None (default)."""
    if colour.tag == lib.GHOSTTY_STYLE_COLOR_PALETTE:
        return ("palette", int(colour.value.palette))
    if colour.tag == lib.GHOSTTY_STYLE_COLOR_RGB:
        rgb = colour.value.rgb
        return ("rgb", (int(rgb.r) << 16) | (int(rgb.g) << 8) | int(rgb.b))
    return None


class _Callbacks:
    """What the library's callbacks (run inside ``ghostty_terminal_vt_write``) need."""

    __slots__ = ("cols", "error", "on_reply", "rows")

    def __init__(self, rows: int, cols: int, on_reply: Callable[[bytes], None]) -> None:
        self.rows = rows
        self.cols = cols
        self.on_reply = on_reply
        self.error: BaseException | None = None

    def reply(self, _terminal: Any, _userdata: Any, data: Any, length: int) -> None:
        reply = bytes(ffi.buffer(data, length))
        if not _WITHHELD_REPLY.fullmatch(reply):
            self.on_reply(reply)

    def size(self, _terminal: Any, _userdata: Any, out: Any) -> bool:
        out.rows = self.rows
        out.columns = self.cols
        out.cell_width, out.cell_height = CELL_PX
        return True

    def failed(self, _type: Any, value: BaseException | None, _tb: Any) -> None:
        if self.error is None and value is not None:
            self.error = value


class VtTerminal:
    """One headless terminal: feed it the program's output, read its state back.

    ``on_reply`` receives what the terminal answers the program (a cursor position report,
    device attributes, colours, sizes), synchronously during :meth:`feed`, in the order the
    queries appeared in the fed bytes.
    """

    def __init__(self, rows: int, cols: int, on_reply: Callable[[bytes], None]) -> None:
        self._calls = _Callbacks(rows, cols, on_reply)
        handle = ffi.new("GhosttyTerminal*")
        _check(lib.ghostty_terminal_new(ffi.NULL, handle, cols, rows), "terminal_new")
        self._t = handle[0]
        # The session keeps its own scrollback; the emulator needs only the visible screen.
        # Capped by bytes, not lines: at a 0-line cap every scrolled line is pruned on its
        # own (8.8 MB/s of `seq` at 160x40), at a 0-byte cap pages go whole (139 MB/s), and
        # a screen that scrolled 200 lines holds 26 KiB instead of 138 (bench/emulators.py).
        _check(
            lib.ghostty_terminal_set(
                self._t, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, ffi.new("size_t*", 0)
            ),
            "set scrollback",
        )
        fg, bg, cursor = DEFAULT_COLORS
        for option, rgb in (
            (lib.GHOSTTY_TERMINAL_OPT_COLOR_FOREGROUND, fg),
            (lib.GHOSTTY_TERMINAL_OPT_COLOR_BACKGROUND, bg),
            (lib.GHOSTTY_TERMINAL_OPT_COLOR_CURSOR, cursor),
        ):
            value = ffi.new("GhosttyColorRgb*", {"r": rgb[0], "g": rgb[1], "b": rgb[2]})
            _check(lib.ghostty_terminal_set(self._t, option, value), "set colour")
        # Grapheme clustering (mode 2027) on by default, as in Ghostty itself and other
        # modern terminals: an emoji with ZWJ or VS16, a flag, a skin tone is one cluster
        # of two cells, not one cell per code point. A full reset keeps the default.
        mode = ffi.new("GhosttyTerminalModeConfig*")
        mode.mode = _GRAPHEME_CLUSTERING
        mode.value = True
        for option in (lib.GHOSTTY_TERMINAL_OPT_MODE_DEFAULT, lib.GHOSTTY_TERMINAL_OPT_MODE):
            _check(lib.ghostty_terminal_set(self._t, option, mode), "set mode 2027")
        # The callbacks must live as long as the terminal: the library keeps their address.
        # They hold only ``_calls``, never this object: a cycle through them would keep a
        # closed session's screen alive until a pass of the cyclic collector.
        calls = self._calls
        self._reply_cb = ffi.callback(
            "GhosttyTerminalWritePtyFn", calls.reply, onerror=calls.failed
        )
        self._size_cb = ffi.callback(
            "GhosttyTerminalSizeFn", calls.size, error=False, onerror=calls.failed
        )
        _check(
            lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_WRITE_PTY, self._reply_cb),
            "set write_pty",
        )
        _check(
            lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_SIZE, self._size_cb),
            "set size",
        )
        self._u16 = ffi.new("uint16_t*")
        self._u32 = ffi.new("uint32_t*")
        self._int = ffi.new("int*")
        self._bool = ffi.new("bool*")
        self._raw = ffi.new("GhosttyCell*")
        self._row_raw = ffi.new("GhosttyRow*")
        self._codepoints = ffi.new("uint32_t[]", 16)
        self._style = ffi.new("GhosttyStyle*")
        self._style.size = ffi.sizeof("GhosttyStyle")
        self._closed = False
        self._release = weakref.finalize(self, _terminal_free, self._t)

    # -- input -------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Emulate ``data``. Raises what a reply callback raised, after the whole write."""
        if self._closed:
            raise VtError("the terminal was closed")
        lib.ghostty_terminal_vt_write(self._t, data, len(data))
        error, self._calls.error = self._calls.error, None
        if error is not None:
            raise error

    def resize(self, rows: int, cols: int) -> None:
        """Change the size (the primary screen reflows, as in Ghostty)."""
        width, height = CELL_PX
        _check(lib.ghostty_terminal_resize(self._t, cols, rows, width, height), "resize")
        self._calls.rows, self._calls.cols = rows, cols

    def close(self) -> None:
        """Free the native terminal now; idempotent (garbage collection frees it otherwise)."""
        self._closed = True
        self._release()

    # -- state -------------------------------------------------------------------------

    @property
    def rows(self) -> int:
        return self._calls.rows

    @property
    def cols(self) -> int:
        return self._calls.cols

    def _get16(self, key: int) -> int:
        _check(lib.ghostty_terminal_get(self._t, key, self._u16), "terminal_get")
        return int(self._u16[0])

    @property
    def cursor(self) -> tuple[int, int]:
        """``(row, col)`` from 0, always inside the screen."""
        row = self._get16(lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y)
        col = self._get16(lib.GHOSTTY_TERMINAL_DATA_CURSOR_X)
        return (min(row, self._calls.rows - 1), min(col, self._calls.cols - 1))

    @property
    def alternate(self) -> bool:
        """True while the alternate screen is shown."""
        _check(
            lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_ACTIVE_SCREEN, self._int),
            "terminal_get active_screen",
        )
        return int(self._int[0]) != int(lib.GHOSTTY_TERMINAL_SCREEN_PRIMARY)

    def lines(self) -> list[str]:
        """Every visible row as Ghostty's own plain-text formatter writes it: a wide
        character once, a cluster (ZWJ, VS16, combining marks) whole, blanks inside a row
        as spaces, trailing blanks trimmed; always :attr:`rows` entries."""
        start = self._grid_ref(0, 0)
        end = self._grid_ref(self._calls.cols - 1, self._calls.rows - 1)
        selection = ffi.new("GhosttySelection*")
        selection.size = ffi.sizeof("GhosttySelection")
        selection.start = start[0]
        selection.end = end[0]
        options = ffi.new("GhosttyTerminalSelectionFormatOptions*")
        options.size = ffi.sizeof("GhosttyTerminalSelectionFormatOptions")
        options.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        options.unwrap = False
        options.trim = True
        options.selection = selection
        needed = ffi.new("size_t*")
        lib.ghostty_terminal_selection_format_buf(self._t, options[0], ffi.NULL, 0, needed)
        buffer = ffi.new("uint8_t[]", max(int(needed[0]), 1))
        _check(
            lib.ghostty_terminal_selection_format_buf(
                self._t, options[0], buffer, len(buffer), needed
            ),
            "format",
        )
        text = bytes(ffi.buffer(buffer, int(needed[0]))).decode("utf-8", "replace")
        lines = [line.rstrip() for line in text.split("\n")][: self._calls.rows]
        return lines + [""] * (self._calls.rows - len(lines))

    def _grid_ref(self, col: int, row: int) -> Any:
        point = _twin.new("DshPoint*")
        point.tag = lib.GHOSTTY_POINT_TAG_ACTIVE
        point.value.x = col
        point.value.y = row
        ref = ffi.new("GhosttyGridRef*")
        ref.size = ffi.sizeof("GhosttyGridRef")
        _check(_grid_ref(self._t, point[0], ref), "grid_ref")
        return ref

    def styled_rows(self) -> Iterator[tuple[int, list[Cell]]]:
        """Each visible row that carries a style, with its styled cells (their text as in
        :meth:`lines`, a wide character's tail cell as '').

        The render state it reads through is made for the call and freed after it: kept
        per screen it would hold a copy of every cell (150 KiB per idle 80x24 screen).
        """
        render = ffi.new("GhosttyRenderState*")
        rows_it = ffi.new("GhosttyRenderStateRowIterator*")
        cells = ffi.new("GhosttyRenderStateRowCells*")
        _check(lib.ghostty_render_state_new(ffi.NULL, render), "render_state_new")
        try:
            _check(lib.ghostty_render_state_row_iterator_new(ffi.NULL, rows_it), "row iterator")
            try:
                _check(lib.ghostty_render_state_row_cells_new(ffi.NULL, cells), "row cells")
                try:
                    yield from self._styled_rows(render[0], rows_it, cells)
                finally:
                    lib.ghostty_render_state_row_cells_free(cells[0])
            finally:
                lib.ghostty_render_state_row_iterator_free(rows_it[0])
        finally:
            lib.ghostty_render_state_free(render[0])

    def _styled_rows(
        self, render: Any, rows_it_out: Any, cells: Any
    ) -> Iterator[tuple[int, list[Cell]]]:
        _check(lib.ghostty_render_state_update(render, self._t), "render update")
        _check(
            lib.ghostty_render_state_get(
                render, lib.GHOSTTY_RENDER_STATE_DATA_ROW_ITERATOR, rows_it_out
            ),
            "row iterator",
        )
        rows_it = rows_it_out[0]
        row = -1
        while lib.ghostty_render_state_row_iterator_next(rows_it):
            row += 1
            _check(
                lib.ghostty_render_state_row_get(
                    rows_it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_RAW, self._row_raw
                ),
                "row raw",
            )
            _check(
                lib.ghostty_row_get(self._row_raw[0], lib.GHOSTTY_ROW_DATA_STYLED, self._bool),
                "row styled",
            )
            if not self._bool[0]:
                continue
            _check(
                lib.ghostty_render_state_row_get(
                    rows_it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS, cells
                ),
                "row cells",
            )
            found = self._row(cells[0])
            if found:
                yield row, found

    def _row(self, cells: Any) -> list[Cell]:
        get = lib.ghostty_render_state_row_cells_get
        found: list[Cell] = []
        col = -1
        while lib.ghostty_render_state_row_cells_next(cells):
            col += 1
            get(cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_HAS_STYLING, self._bool)
            if not self._bool[0]:
                continue
            get(cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_LEN, self._u32)
            count = int(self._u32[0])
            text = " "
            if count:
                if count > len(self._codepoints):
                    self._codepoints = ffi.new("uint32_t[]", count)
                get(cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_BUF, self._codepoints)
                text = "".join(chr(self._codepoints[i]) for i in range(count))
            else:
                get(cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_RAW, self._raw)
                lib.ghostty_cell_get(self._raw[0], lib.GHOSTTY_CELL_DATA_WIDE, self._int)
                if int(self._int[0]) == lib.GHOSTTY_CELL_WIDE_SPACER_TAIL:
                    text = ""
            get(cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_STYLE, self._style)
            style = self._style
            found.append(
                Cell(
                    col=col,
                    text=text,
                    inverse=bool(style.inverse),
                    bold=bool(style.bold),
                    underline=int(style.underline) != 0,
                    fg=_colour(style.fg_color),
                    bg=_colour(style.bg_color),
                )
            )
        return found
