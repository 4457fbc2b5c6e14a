"""Line-oriented scrollback with absolute line numbers and both size bounds.

Reads page by line and incremental tails resume from a line cursor, so lines are
numbered absolutely from the start of the session: trimming the oldest lines never
renumbers the rest, and a cursor taken before a trim still means the same line after it.

Retention keeps the tail: at most ``max_lines`` lines (the open last line included) and
``max_bytes`` UTF-8 bytes (a complete line counts its newline). Whole lines are dropped
from the front; only the newest line is ever cut, keeping its end, when it alone exceeds
the byte bound. Every cut falls on a code point boundary.

Output arrives in small chunks at PTY speed, so appending is amortised O(len(text)):
lines are stored in blocks of many lines (trimming drops whole blocks or advances an
index), byte sizes are tracked incrementally (O(1) for ASCII text), and the open last
line is a list of pieces joined only once it completes, so a 10 MB line without a newline
arriving in 4 KB chunks costs linear time in total.

A block that stops growing is packed into one string. A string object per line costs
about 60 bytes before its text, which for short lines (``seq`` output) would make the
history many times larger than its byte cap; packed, it costs its text, and trimming an
ASCII block by bytes is a ``find`` and a ``count`` of newlines.

Bulk output never becomes line objects at all: an append that completes many lines
stores its complete part as one packed block as it stands (a ``count`` of its newlines
numbers them), so a fast program's output costs a few C passes per chunk, not an object
per line. Small appends (a prompt, a line at a time) still grow a list block.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import overload

import attrs

from ..kernel.subscribe import subscribe
from ..kernel.textbounds import utf8_head, utf8_len, utf8_tail
from .overstrike import needs_render, render, render_lines
from .types import ReadResult, RetainedLines

__all__ = ["Scrollback", "ScrollbackImage"]

_BLOCK_LINES = 4096
"""New lines join the newest block until it holds this many; keeps the block count small."""

_BULK_LINES = 64
"""An append completing at least this many lines is stored packed, without splitting."""

_MERGE_CHARS = 8192
"""Bulk lines join the newest packed block while it is shorter than this, so bursts of
short output do not cost a block each; the copy this takes stays bounded."""

_WINDOW = 64
"""Lines sized at once when trimming by bytes, so most of the work runs in C."""

_SCAN_LINES = 8
"""Below this many lines a position is found by ``find`` line by line."""


class _Packed:
    """A read-mostly list of lines stored as one string, every line followed by a newline.

    Supports what a full block needs: ``len``, indexing, slicing (a slice comes back as a
    list), replacing one line and deleting a prefix. Line positions are found by counting
    newlines onward from the last position looked up, so the usual access pattern —
    trimming from the front, reading onward from there — costs the distance moved, in C.
    """

    __slots__ = ("_at_line", "_at_pos", "_count", "text")

    def __init__(self, text: str, count: int) -> None:
        """Wrap ``text``: ``count`` lines, each ended by a newline (``""`` for none)."""
        self.text = text
        self._count = count
        self._at_line = 0  # a line number and where it starts: where the last lookup ended
        self._at_pos = 0

    @classmethod
    def of_lines(cls, lines: list[str]) -> _Packed:
        """Pack ``lines`` (without their newlines)."""
        return cls("\n".join(lines) + "\n" if lines else "", len(lines))

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[str]:
        return iter(self[:])

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            lo, hi, step = index.indices(self._count)
            if step != 1:
                return list(self)[index]
            if lo >= hi:
                return []
            return self.text[self.position(lo) : self.position(hi) - 1].split("\n")
        index = self._index(index)
        return self.text[self.position(index) : self.position(index + 1) - 1]

    def extend(self, text: str, count: int) -> None:
        """Add ``count`` lines, ``text`` holding each followed by a newline."""
        self.text += text
        self._count += count

    def __setitem__(self, index: int, line: str) -> None:
        index = self._index(index)
        begin, end = self.position(index), self.position(index + 1) - 1
        self.text = self.text[:begin] + line + self.text[end:]
        self._at_line, self._at_pos = index, begin

    def __delitem__(self, index: slice) -> None:
        lo, hi, step = index.indices(self._count)
        if lo != 0 or step != 1:
            raise TypeError("only a prefix of packed lines can be deleted")
        if hi == 0:
            return
        self.text = self.text[self.position(hi) :]
        self._count -= hi
        self._at_line = self._at_pos = 0

    def position(self, line: int) -> int:
        """Where line ``line`` starts in :attr:`text` (``len(text)`` for ``len(self)``)."""
        if line >= self._count:
            return len(self.text)
        at, pos = self._at_line, self._at_pos
        if line < at:
            at = pos = 0
        if line > at:
            pos = _skip_lines(self.text, pos, line - at, len(self.text) // self._count)
        self._at_line, self._at_pos = line, pos
        return pos

    def span_bytes(self, lo: int, hi: int, is_ascii: bool) -> int:
        """UTF-8 size of lines ``[lo, hi)`` with their newlines."""
        if lo >= hi:
            return 0
        begin = self.position(lo)
        end = self.position(hi)
        if is_ascii:
            return end - begin
        return utf8_len(self.text[begin:end])

    def ascii_prefix_covering(self, lo: int, limit: int, nbytes: int) -> tuple[int, int]:
        """The fewest lines from ``lo`` (at most to ``limit``) holding ``nbytes`` bytes.

        For an ASCII block only, where characters are bytes. Returns the index after
        those lines and their size with newlines.
        """
        begin = self.position(lo)
        newline = self.text.find("\n", begin + max(nbytes, 1) - 1)
        if newline >= 0:
            end = lo + self.text.count("\n", begin, newline + 1)
            if end < limit:
                self._at_line, self._at_pos = end, newline + 1
                return end, newline + 1 - begin
        return limit, self.position(limit) - begin

    def _index(self, index: int) -> int:
        if index < 0:
            index += self._count
        if not 0 <= index < self._count:
            raise IndexError("line index out of range")
        return index


def _skip_lines(text: str, pos: int, lines: int, average: int) -> int:
    """Return the position just after the ``lines``-th newline from ``pos`` on.

    Counts newlines over windows sized by the ``average`` line length, so the work runs in
    C; a window that overshoots is halved. Lines exist: ``text`` ends with a newline.
    """
    size = len(text)
    step = max(average, 1)
    while lines > _SCAN_LINES:
        end = min(pos + lines * step, size)
        found = text.count("\n", pos, end)
        if found < lines:
            pos, lines = end, lines - found
        elif found == lines:
            return text.rfind("\n", pos, end) + 1
        else:
            step = max(step // 2, 1)
    find = text.find
    for _ in range(lines):
        pos = find("\n", pos) + 1
    return pos


@attrs.define(slots=True, eq=False)
class _Block:
    """Complete lines ``lines[start:]``, numbered from ``base`` (the number of ``lines[0]``).

    The newest block is a list that grows; older blocks are :class:`_Packed`.
    """

    base: int
    lines: list[str] | _Packed
    start: int
    nbytes: int  # retained lines, each with its newline
    ascii: bool

    @property
    def count(self) -> int:
        return len(self.lines) - self.start

    @property
    def end(self) -> int:
        return self.base + len(self.lines)


def _span_bytes(block: _Block, lo: int, hi: int) -> int:
    """UTF-8 size of ``block.lines[lo:hi]``, a newline after each."""
    lines = block.lines
    if isinstance(lines, _Packed):
        return lines.span_bytes(lo, hi, block.ascii)
    return _lines_bytes(lines[lo:hi], block.ascii)


def _lines_bytes(lines: list[str], is_ascii: bool) -> int:
    """UTF-8 size of ``lines`` with a newline after each."""
    if not lines:
        return 0
    if is_ascii:
        return sum(map(len, lines)) + len(lines)
    return utf8_len("\n".join(lines)) + 1


@attrs.frozen
class ScrollbackImage:
    """What a scrollback retains, as stored: enough to rebuild one that reads the same.

    A world's harness starts its mirror of a session from one (the session printed
    before anyone observed it, or while no harness was attached) and then follows the
    observed appends (SPEC §21).
    """

    first_line: int
    lines: tuple[str, ...]
    open_text: str
    open_active: bool
    dropped: bool


class Scrollback:
    """Bounded history of one terminal's sanitized text, line by line.

    Not thread-safe. ``append`` takes text exactly as the sanitizer produced it: ``\\n``
    ends a line, everything else is line content. Lines are stored as they came and
    rendered (:mod:`dsh_terminal_core.overstrike`) as they are read, so a backspace in a
    later chunk still applies to the text before it; until a backspace is first stored,
    reads skip that step.
    """

    def __init__(self, max_lines: int = 10000, max_bytes: int = 4 * 1024 * 1024) -> None:
        """Create an empty scrollback; raises ValueError unless both bounds are positive."""
        if max_lines < 1:
            raise ValueError(f"max_lines must be positive, got {max_lines}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self._max_lines = max_lines
        self._max_bytes = max_bytes
        self._blocks: deque[_Block] = deque()
        self._first = 0  # number of the oldest retained complete line
        self._complete = 0  # complete lines ever; also the number of the open line
        self._nlines = 0
        self._nbytes = 0
        self._open: deque[str] = deque()
        self._open_sizes: deque[int] = deque()
        self._open_bytes = 0
        self._open_ascii = True
        self._open_active = False  # the open line has started, even if cut to nothing
        self._dropped = False
        # A backspace was ever stored: only then do reads render (most sessions never).
        self._overstruck = False
        self._observers: list[Callable[[str], None]] = []

    @property
    def max_lines(self) -> int:
        return self._max_lines

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    @property
    def total_lines(self) -> int:
        """Lines ever started: every complete line, plus the open line once it has text."""
        return self._complete + (1 if self._open_active else 0)

    @property
    def first_line(self) -> int:
        """Absolute number of the oldest retained line (``total_lines`` when empty)."""
        if self._nlines:
            return self._first
        return self._complete

    @property
    def open_line_number(self) -> int:
        """Absolute number of the line the next text lands on (the open line, if any)."""
        return self._complete

    @property
    def dropped(self) -> bool:
        """True once any line or part of a line was trimmed."""
        return self._dropped

    @property
    def retained_bytes(self) -> int:
        """UTF-8 bytes retained: complete lines with their newlines, plus the open line."""
        return self._nbytes + self._open_bytes

    @property
    def retained_lines(self) -> int:
        """Lines retained, the open line included."""
        return self._nlines + (1 if self._open_active else 0)

    @property
    def open_line(self) -> str:
        """The line still being written (no newline yet), as retained and as a terminal
        shows it (backspaces applied); ``""`` when none."""
        text = "".join(self._open)
        return render(text) if self._overstruck else text

    def image(self) -> ScrollbackImage:
        """The retained lines as stored (backspaces unrendered), for :meth:`from_image`."""
        return ScrollbackImage(
            first_line=self.first_line,
            lines=tuple(self._complete_lines(self.first_line, self._complete)),
            open_text="".join(self._open),
            open_active=self._open_active,
            dropped=self._dropped,
        )

    @classmethod
    def from_image(cls, image: ScrollbackImage, *, max_lines: int, max_bytes: int) -> Scrollback:
        """A scrollback with the original's bounds that reads as the original did.

        Later appends of the same text then keep the two equal: what they retain, number
        and trim depends only on what is retained, never on how it was stored.
        """
        rebuilt = cls(max_lines=max_lines, max_bytes=max_bytes)
        rebuilt._first = rebuilt._complete = image.first_line
        if image.lines:
            rebuilt.append("\n".join(image.lines) + "\n")
        if image.open_text:
            rebuilt.append(image.open_text)
        rebuilt._open_active = image.open_active
        rebuilt._dropped = image.dropped
        return rebuilt

    def observe(self, observer: Callable[[str], None]) -> Callable[[], None]:
        """Call ``observer`` with the text of every later :meth:`append`, before it lands.

        The appends are all that ever changes a scrollback, and the same appends give the
        same lines, numbers and trims, so a copy fed the observed text in order (a
        world's mirror, SPEC §21) reads exactly as this one. Returns the remover.
        """
        return subscribe(self._observers, observer)

    def append(self, text: str) -> int:
        """Add sanitized text; a trailing partial line stays open for later appends.

        Returns how many lines the text completed (its newlines), so a caller that needs
        the count does not scan the text again.
        """
        if not text:
            return 0
        if self._observers:
            for observer in tuple(self._observers):
                observer(text)
        if not self._overstruck and needs_render(text):
            self._overstruck = True
        last_newline = text.rfind("\n")
        if last_newline < 0:
            self._extend_open(text)
            self._trim()
            return 0
        if last_newline + 1 >= _BULK_LINES:
            completed = self._append_bulk(text, last_newline)
            if completed:
                self._trim()
                return completed
        pieces = text.split("\n")
        rest = pieces.pop()
        completed = len(pieces)
        complete_bytes = utf8_len(text) - utf8_len(rest) + self._open_bytes
        is_ascii = self._open_ascii and text.isascii()
        if self._open:
            self._open.append(pieces[0])
            pieces[0] = "".join(self._open)
            self._clear_open()
        self._open_active = False
        self._add_lines(pieces, complete_bytes, is_ascii)
        if rest:
            self._extend_open(rest)
        self._trim()
        return completed

    def read(self, offset: int, count: int, max_bytes: int) -> ReadResult:
        """Return up to ``count`` lines from line number ``offset``, within ``max_bytes``.

        Lines are numbered from 1 here, as on every surface (SPEC §27.6): ``offset`` and
        the result's ``line_begin`` are 1-based, ``line_end`` is the number of the last
        line returned (``line_begin - 1`` when none). The other methods take 0-based
        positions (:attr:`first_line`, cursors), which never leave the backends.
        An offset before the first retained line starts at that line and reports
        ``truncated``. The open line is included when the range reaches it. The text
        (lines joined by ``\\n``) holds whole lines while they fit in ``max_bytes``; if
        not even the first fits, its head is returned and counted, so paging by
        ``line_end`` always advances. ``truncated`` is set whenever requested lines were
        dropped or left out. Raises ValueError for an offset below 1 or a negative count.
        """
        if offset < 1 or count < 0:
            raise ValueError(f"offset must be >= 1 and count >= 0, got {offset}, {count}")
        total = self.total_lines
        first = self.first_line
        truncated = False
        begin = offset - 1
        if begin < first:
            begin = first
            truncated = True
        begin = min(begin, total)
        end = min(begin + count, total)
        lines = self._lines_between(begin, end)
        if self._overstruck:
            lines = render_lines(lines)
        text = "\n".join(lines)
        if utf8_len(text) > max_bytes:
            truncated = True
            text, taken = self._fit(lines, max_bytes)
            end = begin + taken
        return ReadResult(
            text=text, total_lines=total, line_begin=begin + 1, line_end=end, truncated=truncated
        )

    def lines_since(self, cursor: int) -> tuple[list[str], int]:
        """Return the complete lines numbered ``cursor`` and later, and the next cursor.

        Only lines ended by a newline are returned, so a line is never sent twice or in
        pieces. Lines already trimmed are skipped; compare ``cursor`` with
        :attr:`first_line` beforehand to learn that some were missed.
        """
        begin = max(cursor, self.first_line)
        if begin >= self._complete:
            return [], max(cursor, self._complete)
        lines = self._complete_lines(begin, self._complete)
        return (render_lines(lines) if self._overstruck else lines), self._complete

    def retained(self) -> RetainedLines:
        """A snapshot of every retained line, numbered as :meth:`read` numbers them.

        Costs the number of blocks, not their text: a packed block hands out its string
        itself (strings never change, so the snapshot stays valid as output goes on); only
        the newest, list block and the open line are joined. Backspaces are not rendered
        here (``overstruck`` says whether any may need it), so the caller may do that work
        off the event loop.
        """
        segments: list[tuple[int, str]] = []
        for block in self._blocks:
            if not block.count:
                continue
            lines = block.lines
            if isinstance(lines, _Packed):
                begin = lines.position(block.start)
                text = lines.text[begin:] if begin else lines.text
            else:
                text = "\n".join(lines[block.start :]) + "\n"
            segments.append((block.base + block.start, text))
        if self._open_active:
            segments.append((self._complete, "".join(self._open) + "\n"))
        return RetainedLines(
            line_begin=self.first_line,
            line_end=self.total_lines,
            segments=tuple(segments),
            overstruck=self._overstruck,
        )

    def tail_text(self, max_bytes: int) -> str:
        """Return the last ``max_bytes`` UTF-8 bytes of the retained text, code point safe.

        The retained text is every complete line followed by its newline, then the open
        line.
        """
        open_text = "".join(self._open)
        size = self._open_bytes
        chosen: list[_Block] = []
        for block in reversed(self._blocks):
            if size >= max_bytes:
                break
            chosen.append(block)
            size += block.nbytes
        lines: list[str] = []
        for block in reversed(chosen):
            lines.extend(block.lines[block.start :])
        text = "\n".join(lines) + "\n" + open_text if lines else open_text
        tail = utf8_tail(text, max_bytes)[0]
        return render(tail) if self._overstruck else tail

    # -- storage ---------------------------------------------------------------------

    def _append_bulk(self, text: str, last_newline: int) -> int:
        """Store the lines ``text`` completes packed, without splitting it: as a block of
        their own, or joined to the newest packed block while that one is small.

        Returns how many lines that is, or 0, having changed nothing, when they are too
        few to be worth a block of their own (the caller then splits them into the list
        block).
        """
        count = text.count("\n")
        if count < _BULK_LINES:
            return 0
        complete = text if last_newline == len(text) - 1 else text[: last_newline + 1]
        nbytes = utf8_len(complete) + self._open_bytes
        is_ascii = self._open_ascii and complete.isascii()
        if self._open:
            self._open.append(complete)
            complete = "".join(self._open)
            self._clear_open()
        self._open_active = False
        last = self._blocks[-1] if self._blocks else None
        if (
            last is not None
            and isinstance(last.lines, _Packed)
            and len(last.lines.text) < _MERGE_CHARS
        ):
            last.lines.extend(complete, count)
            last.nbytes += nbytes
            last.ascii = last.ascii and is_ascii
        else:
            self._start_block(_Packed(complete, count), nbytes, is_ascii)
        self._count(count, nbytes)
        rest = text[last_newline + 1 :]
        if rest:
            self._extend_open(rest)
        return count

    def _extend_open(self, text: str) -> None:
        size = utf8_len(text)
        self._open.append(text)
        self._open_sizes.append(size)
        self._open_bytes += size
        self._open_ascii = self._open_ascii and text.isascii()
        self._open_active = True

    def _clear_open(self) -> None:
        self._open.clear()
        self._open_sizes.clear()
        self._open_bytes = 0
        self._open_ascii = True

    def _add_lines(self, lines: list[str], nbytes: int, is_ascii: bool) -> None:
        last = self._blocks[-1] if self._blocks else None
        if last is not None and isinstance(last.lines, list) and len(last.lines) < _BLOCK_LINES:
            # Only the newest block grows, and only while it is a list.
            last.lines.extend(lines)
            last.nbytes += nbytes
            last.ascii = last.ascii and is_ascii
        else:
            self._start_block(lines, nbytes, is_ascii)
        self._count(len(lines), nbytes)

    def _start_block(self, lines: list[str] | _Packed, nbytes: int, is_ascii: bool) -> None:
        """A new newest block; the one before it, if a list, is packed (it grows no more)."""
        if self._blocks and isinstance(self._blocks[-1].lines, list):
            self._pack(self._blocks[-1])
        self._blocks.append(
            _Block(base=self._complete, lines=lines, start=0, nbytes=nbytes, ascii=is_ascii)
        )

    def _count(self, lines: int, nbytes: int) -> None:
        """Account for ``lines`` complete lines of ``nbytes`` just added."""
        if not self._nlines:
            self._first = self._complete
        self._complete += lines
        self._nlines += lines
        self._nbytes += nbytes

    @staticmethod
    def _pack(block: _Block) -> None:
        """Store a block that has stopped growing as one string (dropping trimmed lines)."""
        lines = block.lines
        assert isinstance(lines, list)
        if block.start:
            del lines[: block.start]
            block.base += block.start
            block.start = 0
        block.lines = _Packed.of_lines(lines)

    # -- bounds ----------------------------------------------------------------------

    def _trim(self) -> None:
        open_bytes = self._open_bytes
        if (
            self._nbytes + open_bytes <= self._max_bytes
            and self._nlines < self._max_lines
            and (not self._blocks or not self._blocks[0].start)
        ):
            return  # within both bounds, nothing dropped to give back: the usual case
        if self._open_bytes > self._max_bytes:
            self._cut_open(self._max_bytes)
        open_line = 1 if self._open_active else 0
        line_budget = self._max_lines - open_line
        if self._nlines > line_budget:
            self._drop_lines(self._nlines - line_budget)
        byte_budget = self._max_bytes - self._open_bytes
        if self._nbytes > byte_budget:
            # The newest complete line survives, cut to its tail, whenever the open line
            # leaves it any room: a huge line followed by a prompt must stay readable.
            self._drop_bytes(self._nbytes - byte_budget, keep_last=not open_line or byte_budget > 1)
        if self._blocks:
            head = self._blocks[0]
            # Give back the memory of dropped lines once they are half the block.
            if head.start and head.start * 2 >= len(head.lines):
                del head.lines[: head.start]
                head.base += head.start
                head.start = 0

    def _cut_open(self, budget: int) -> None:
        """Keep the last ``budget`` bytes of the open line, dropping whole pieces first."""
        self._dropped = True
        while self._open and self._open_bytes - self._open_sizes[0] >= budget:
            self._open_bytes -= self._open_sizes.popleft()
            self._open.popleft()
        if self._open_bytes > budget:
            piece = self._open.popleft()
            size = self._open_sizes.popleft()
            kept, _ = utf8_tail(piece, budget - (self._open_bytes - size))
            kept_size = utf8_len(kept)
            self._open_bytes += kept_size - size
            if kept:
                self._open.appendleft(kept)
                self._open_sizes.appendleft(kept_size)

    def _drop_block(self) -> _Block:
        block = self._blocks.popleft()
        self._nlines -= block.count
        self._nbytes -= block.nbytes
        self._first = block.end
        return block

    def _advance(self, block: _Block, count: int, nbytes: int) -> None:
        block.start += count
        block.nbytes -= nbytes
        self._nlines -= count
        self._nbytes -= nbytes
        self._first = block.base + block.start

    def _drop_lines(self, count: int) -> None:
        """Drop the ``count`` oldest complete lines."""
        self._dropped = True
        while count and self._blocks[0].count <= count:
            count -= self._drop_block().count
        if count:
            block = self._blocks[0]
            self._advance(block, count, _span_bytes(block, block.start, block.start + count))

    def _drop_bytes(self, excess: int, keep_last: bool) -> None:
        """Drop the oldest complete lines until ``excess`` bytes are gone.

        With ``keep_last`` the newest line survives, cut to its tail if it alone is
        still too large.
        """
        self._dropped = True
        while excess > 0 and self._nlines:
            block = self._blocks[0]
            only_block = len(self._blocks) == 1
            if block.nbytes <= excess and not (keep_last and only_block):
                excess -= self._drop_block().nbytes
                continue
            # Drop a window of lines at a time while it fits in the excess, then line by line.
            limit = len(block.lines) - (1 if keep_last and only_block else 0)
            if block.ascii and isinstance(block.lines, _Packed) and block.start < limit:
                # The same lines as below (the fewest that cover the excess), found by
                # binary search over the offsets.
                end, size = block.lines.ascii_prefix_covering(block.start, limit, excess)
                self._advance(block, end - block.start, size)
                excess -= size
            while excess > 0 and block.start < limit:
                stop = min(block.start + _WINDOW, limit)
                window = block.lines[block.start : stop]
                size = _lines_bytes(window, block.ascii)
                if size <= excess:
                    self._advance(block, len(window), size)
                    excess -= size
                    continue
                for line in window:
                    if excess <= 0:
                        break
                    size = utf8_len(line) + 1
                    self._advance(block, 1, size)
                    excess -= size
                break
            if block.count == 0:
                self._blocks.popleft()
                continue
            if excess > 0:
                self._cut_last_line(block, excess)
                excess = 0

    def _cut_last_line(self, block: _Block, excess: int) -> None:
        """Cut the single retained line to its tail so it sheds ``excess`` bytes."""
        index = len(block.lines) - 1
        line = block.lines[index]
        size = utf8_len(line)
        kept, _ = utf8_tail(line, size - excess)
        kept_size = utf8_len(kept)
        block.lines[index] = kept
        block.nbytes -= size - kept_size
        self._nbytes -= size - kept_size

    # -- lookup ----------------------------------------------------------------------

    def _complete_lines(self, begin: int, end: int) -> list[str]:
        """Retained complete lines numbered in ``[begin, end)``."""
        found: list[str] = []
        for block in self._blocks:
            if block.end <= begin:
                continue
            if block.base + block.start >= end:
                break
            lo = max(begin - block.base, block.start)
            hi = min(end - block.base, len(block.lines))
            found.extend(block.lines[lo:hi])
        return found

    def _lines_between(self, begin: int, end: int) -> list[str]:
        """Retained lines numbered in ``[begin, end)``, the open line included."""
        if begin >= end:
            return []
        lines = self._complete_lines(begin, min(end, self._complete))
        if self._open_active and begin <= self._complete < end:
            lines.append("".join(self._open))
        return lines

    @staticmethod
    def _fit(lines: list[str], max_bytes: int) -> tuple[str, int]:
        """Join as many whole lines as fit in ``max_bytes``; at least the head of one."""
        size = -1  # no newline before the first line
        taken = 0
        for line in lines:
            grown = size + 1 + utf8_len(line)
            if grown > max_bytes:
                break
            size = grown
            taken += 1
        if taken:
            return "\n".join(lines[:taken]), taken
        if not lines:
            return "", 0
        return utf8_head(lines[0], max_bytes)[0], 1
