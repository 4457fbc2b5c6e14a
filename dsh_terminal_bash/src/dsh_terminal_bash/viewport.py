"""Bounded tail buffers for the output of one send.

A send collects what the terminal printed while it ran: the settled result shows the
last ``max_bytes`` of it (the viewport) and a background reader consumes it piece by
piece. Output can be far larger than the bound, so both keep only the tail, and appending
costs O(len(text)) however much arrived before: pieces are kept whole and only joined
and cut when read.
"""

from __future__ import annotations

from collections import deque

from dsh_terminal_core.textbounds import utf8_len, utf8_tail

__all__ = ["TailBuffer", "ViewportBuffer"]


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


class ViewportBuffer:
    """Output of one send: a bounded viewport plus a consuming cursor over it.

    :meth:`text` is the tail of everything appended; :meth:`read_new` returns what
    arrived since its previous call, so an incremental reader never sees text twice. Both
    are bounded by ``max_bytes`` and keep the tail.
    """

    def __init__(self, max_bytes: int) -> None:
        """Create an empty buffer; raises ValueError unless ``max_bytes`` is positive."""
        self._all = TailBuffer(max_bytes)
        # Until the first read_new, "everything since the last read" is the viewport
        # itself, so the cursor's own buffer starts only then: a foreground send, which
        # never reads incrementally, keeps one copy of its output instead of two.
        self._new: TailBuffer | None = None
        self._max_bytes = max_bytes

    @property
    def truncated(self) -> bool:
        """True once the viewport lost the start of the output."""
        return self._all.truncated

    def append(self, text: str) -> None:
        """Add output that arrived during the send."""
        self._all.append(text)
        if self._new is not None:
            self._new.append(text)

    def text(self) -> str:
        """Return the viewport: the last ``max_bytes`` of the output, code point safe."""
        return self._all.text()

    def read_new(self) -> tuple[str, bool]:
        """Return the output since the previous call and whether its start was dropped."""
        if self._new is None:
            self._new = TailBuffer(self._max_bytes)
            return self._all.text(), self._all.truncated
        text = self._new.text()
        truncated = self._new.truncated
        self._new.clear()
        return text, truncated
