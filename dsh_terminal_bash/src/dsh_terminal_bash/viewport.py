"""Bounded buffers for the output of one send.

A send collects what the terminal printed while it ran: the settled result shows at most
``max_bytes`` of it (the viewport: its head and its tail) and a background reader
consumes it piece by piece (the tail of what is new). Output can be far larger than the
bound, and appending costs O(len(text)) however much arrived before: pieces are kept
whole and only joined and cut when read.
"""

from __future__ import annotations

from dsh_terminal_core.kernel.textbounds import TailBuffer, utf8_head, utf8_len
from dsh_terminal_core.registry.overstrike import needs_render, render
from dsh_terminal_core.registry.scrollback import Scrollback

__all__ = ["HEAD_TAIL_MIN_BYTES", "MARKER_ROOM", "TailBuffer", "ViewportBuffer"]


# Bytes kept back for the omission line; below HEAD_TAIL_MIN_BYTES a bound is too small
# to show two useful ends and a marker, and the viewport keeps only the tail.
MARKER_ROOM = 200
HEAD_TAIL_MIN_BYTES = 1024


class ViewportBuffer:
    """Output of one send: a bounded viewport plus a consuming cursor over it.

    :meth:`text` keeps the **head and the tail** of everything appended: long output
    loses its middle, never its start, because the first error of a build or a test run
    matters as much as the last line. One line in place of the middle says which lines
    are missing and how to page them (their absolute scrollback numbers, 1-based, as
    ``terminal_read`` shows them), given ``first_line``, the 0-based scrollback number
    of the line the output starts on. :meth:`read_new` returns what arrived since its
    previous call, so an incremental reader never sees text twice. Both stay within
    ``max_bytes``.
    """

    def __init__(self, max_bytes: int, first_line: int = 0) -> None:
        """Create an empty buffer; raises ValueError unless ``max_bytes`` is positive."""
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be positive, got {max_bytes}")
        self._max_bytes = max_bytes
        #: The 0-based scrollback number of the line the output starts on (set once the
        #: send knows it; a plain attribute, since it is set on every send).
        self.first_line = first_line
        #: The scrollback the output also went to, set with ``first_line``: what it still
        #: retains decides which omitted lines a hint may offer to read.
        self.lines: Scrollback | None = None
        split = max_bytes >= HEAD_TAIL_MIN_BYTES
        self._head_room = (max_bytes - MARKER_ROOM) // 2 if split else 0
        self._tail_room = max_bytes - MARKER_ROOM - self._head_room if split else max_bytes
        # Made when the head is full: most sends' output fits in the head, and the tail's
        # buffer is three more objects each garbage collection would traverse.
        self._tail: TailBuffer | None = None
        self._head: list[str] = []
        self._head_bytes = 0
        self._head_full = not split
        self._bytes = 0  # everything appended
        self._newlines = 0
        # Until the first read_new, "everything since the last read" is the viewport
        # itself, so the cursor's own buffer starts only then: a foreground send, which
        # never reads incrementally, keeps one copy of its output instead of two.
        self._new: TailBuffer | None = None

    @property
    def truncated(self) -> bool:
        """True once the viewport lost part of the output (its middle, or its start)."""
        return self._tail is not None and self._tail.truncated

    def append(self, text: str, newlines: int | None = None) -> None:
        """Add output that arrived during the send. O(len(text)).

        ``newlines`` is how many newlines ``text`` holds, when the caller already knows
        (the scrollback counts them as it stores the text); otherwise they are counted.
        """
        if not text:
            return
        size = utf8_len(text)
        self._bytes += size
        self._newlines += text.count("\n") if newlines is None else newlines
        if self._new is not None:
            self._new.append(text)
        if not self._head_full:
            room = self._head_room - self._head_bytes
            if size <= room:
                self._head.append(text)
                self._head_bytes += size
                return
            part, _ = utf8_head(text, room)
            self._head.append(part)
            self._head_bytes += utf8_len(part)
            self._head_full = True
            text = text[len(part) :]
            if not text:
                return
        if self._tail is None:
            self._tail = TailBuffer(self._tail_room)
        self._tail.append(text)

    def text(self) -> str:
        """Return the viewport: all of the output, or its head, one omission line, its tail.

        The omission line offers to read only lines the scrollback (``lines``) still
        holds, and says how many of the omitted ones are gone for good.

        Backspaces and returns are applied as a terminal shows them
        (:mod:`dsh_terminal_core.registry.overstrike`).
        """
        head = "".join(self._head)
        if self._tail is None or not self._tail.truncated:
            text = head if self._tail is None else head + self._tail.text()
            return render(text) if needs_render(text) else text
        tail = self._tail.text()
        head, tail = render(head), render(tail)
        if self._head_room == 0:
            return tail
        # Show whole lines at both ends, unless that would give away most of an end (a
        # few very long lines): then the omission starts or ends inside a line.
        cut = head.rfind("\n")
        head_whole = cut >= len(head) // 2
        if head_whole:
            head = head[: cut + 1]
        cut = tail.find("\n")
        tail_whole = 0 <= cut < len(tail) // 2
        if tail_whole:
            tail = tail[cut + 1 :]
        first = head.count("\n")  # output-relative index of the first omitted line
        last = self._newlines - tail.count("\n") - (1 if tail_whole else 0)
        omitted = self._bytes - utf8_len(head) - utf8_len(tail)
        begin = self.first_line + first + 1
        end = self.first_line + max(last, first) + 1
        first_retained = self.lines.first_line if self.lines is not None else 0
        marker = _omission(begin, end, omitted, first_retained + 1)
        joint = "" if not head or head_whole else "\n"
        return f"{head}{joint}{marker}{tail}"

    def read_new(self) -> tuple[str, bool]:
        """Return the output since the previous call and whether part of it was dropped.

        The first call returns the viewport itself (head and tail); later calls the tail
        of what arrived since, within ``max_bytes``.
        """
        if self._new is None:
            self._new = TailBuffer(self._max_bytes)
            return self.text(), self.truncated
        # A piece is rendered on its own: a backspace over text an earlier read already
        # returned cannot take it back, and is dropped.
        text = render(self._new.text())
        truncated = self._new.truncated
        self._new.clear()
        return text, truncated


def _omission(begin: int, end: int, omitted: int, retained: int) -> str:
    """The line in place of lines ``begin``-``end`` (1-based), ``omitted`` bytes.

    ``retained`` is the oldest line the scrollback still holds: a hint to read lines
    before it would return others, so it names only lines from there on and says how
    many of the omitted ones are gone.
    """
    if end > begin:
        what = f"{end - begin + 1} lines ({omitted} bytes) omitted: lines {begin}-{end}"
    else:
        what = f"{omitted} bytes of line {begin} omitted"
    if retained <= begin:
        them = "them" if end > begin else "it"
        return f"[… {what}; read {them} with terminal_read offset={begin} …]\n"
    if retained > end:
        gone = "all of them are" if end > begin else "it is"
        return f"[… {what}; {gone} gone for good, past the scrollback's limit …]\n"
    return (
        f"[… {what}; lines {begin}-{retained - 1} are gone for good, past the scrollback's "
        f"limit; read lines {retained}-{end} with terminal_read offset={retained} …]\n"
    )
