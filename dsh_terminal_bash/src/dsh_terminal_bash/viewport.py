"""Bounded tail buffers for the output of one send.

A send collects what the terminal printed while it ran: the settled result shows the
last ``max_bytes`` of it (the viewport) and a background reader consumes it piece by
piece. Output can be far larger than the bound, so both keep only the tail, and appending
costs O(len(text)) however much arrived before: pieces are kept whole and only joined
and cut when read.
"""

from __future__ import annotations

from dsh_terminal_core.textbounds import TailBuffer

__all__ = ["TailBuffer", "ViewportBuffer"]


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
