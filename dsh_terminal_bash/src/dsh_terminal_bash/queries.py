"""Answers to a program's terminal queries in a line session, which has no emulator.

A program that asks the terminal where the cursor is (``CSI 6n``) or what it is
(``CSI c``) waits for the answer; prompt_toolkit, fzf and many setup scripts ask even
under ``TERM=dumb``. Unanswered, the program stalls until its own timeout, or takes the
agent's next keys as the report. A line session keeps no screen, so the answers are what a
terminal of the session's size would say with its output scrolling at the bottom: the
cursor on the last row, in the column the current line has reached. Screen sessions
answer every query from their emulator instead (``screen.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from dsh_terminal_core.provider import TerminalProcess

__all__ = ["DA1_REPLY", "DA2_REPLY", "LineQueries", "Replies"]

#: VT220 with ANSI colour, the primary device attributes libghostty-vt reports too.
DA1_REPLY = b"\x1b[?62;22c"
#: Secondary device attributes: a VT220, firmware 0, no cartridge (as libghostty-vt).
DA2_REPLY = b"\x1b[>1;0;0c"

# CPR (``CSI 6n``), DECXCPR (``CSI ? 6 n``), DA1 (``CSI c``, ``CSI 0 c``) and DA2
# (``CSI > c``, ``CSI > 0 c``).
_QUERY = re.compile(rb"\x1b\[(\??)6n|\x1b\[0?c|\x1b\[>0?c")
_OPEN_QUERY = re.compile(rb"\x1b(?:\[[?>]?[06]?)?\Z")
_ESCAPE = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)")
# How much of the current line is kept to count its column.
_MAX_LINE = 4096


class LineQueries:
    """Scan a line session's output for queries and produce the replies, chunk by chunk."""

    def __init__(self, rows: int, cols: int) -> None:
        self.rows = rows
        self.cols = cols
        self._carry = b""
        self._line = b""  # the output since the last CR or LF, for the cursor's column

    def resize(self, rows: int, cols: int) -> None:
        self.rows, self.cols = rows, cols

    def feed(self, data: bytes) -> bytes:
        """The replies to the queries in ``data`` (with any query split off the previous
        chunk), in order; b"" when it asks nothing (one ``find`` for most chunks)."""
        scan = self._carry + data if self._carry else data
        if b"\x1b[" not in scan:
            self._carry = scan[-1:] if scan.endswith(b"\x1b") else b""
            self._track_line(data)
            return b""
        replies = bytearray()
        line_from = len(scan) - len(data)  # the carried bytes were counted already
        for match in _QUERY.finditer(scan):
            if match.group(0).endswith(b"n"):
                if match.start() < line_from:  # its start came last chunk: not text
                    self._line = self._line[: len(self._line) - (line_from - match.start())]
                self._track_line(scan[line_from : match.start()])
                line_from = max(line_from, match.end())
                row, col = self.rows, self._column() + 1
                if match.group(1):
                    replies += b"\x1b[?%d;%d;1R" % (row, col)
                else:
                    replies += b"\x1b[%d;%dR" % (row, col)
            elif match.group(0).startswith(b"\x1b[>"):
                replies += DA2_REPLY
            else:
                replies += DA1_REPLY
        self._track_line(scan[line_from:])
        tail = scan.rfind(b"\x1b")
        open_query = tail >= 0 and _OPEN_QUERY.match(scan, tail)
        self._carry = scan[tail:] if open_query else b""
        return bytes(replies)

    def _track_line(self, data: bytes) -> None:
        """Keep the output since the last CR or LF: two memchr scans, since this runs on
        every chunk of every line session."""
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut >= 0:
            self._line = data[cut + 1 :]
        else:
            self._line = (self._line + data)[-_MAX_LINE:]

    def _column(self) -> int:
        """The 0-based column the current line's text has reached (wrapping at the width;
        a character counts one column: an estimate, as no emulator keeps the screen)."""
        text = _ESCAPE.sub(b"", self._line).decode("utf-8", "replace")
        printable = sum(1 for char in text if char >= " " or char == "\t")
        return printable % self.cols if self.cols else 0


class Replies:
    """Write the terminal's replies to a program's queries, in order, at once.

    Only a program that can read a reply gets one: the terminal out of canonical mode (a
    program that asks sets raw or cbreak mode first, to read the answer unechoed and
    without Enter) and a program other than the shell in the foreground. A reply to a
    script's ``printf`` of ``ESC [ c``, to a ``cat`` of a file holding a query, or to a
    background job at the prompt would otherwise land in the shell's line editor, and the
    agent's next command would start with ``62;22c``. (So bash's own ``read -d R`` after a
    query goes unanswered: the shell is the foreground.)
    """

    def __init__(self, process: TerminalProcess) -> None:
        self._process = process
        self._writers: set[asyncio.Task[None]] = set()

    def answer(self, replies: bytes, shell_pgid: int | None) -> None:
        """Write ``replies`` behind any input being written, or drop them (see above).
        ``shell_pgid``: the shell's process group, None while it is not known yet."""
        if not self._readable(shell_pgid):
            return
        try:
            written = self._process.write_now(replies)
        except Exception:  # the terminal is gone: nobody is left to read the reply
            return
        if written < len(replies):
            task = asyncio.get_running_loop().create_task(self._write(replies[written:]))
            self._writers.add(task)
            task.add_done_callback(self._writers.discard)

    def _readable(self, shell_pgid: int | None) -> bool:
        modes = self._process.terminal_modes()
        if modes is not None and modes[1]:  # canonical: nobody is reading a reply
            return False
        return shell_pgid is None or self._process.foreground_pgid() != shell_pgid

    async def _write(self, rest: bytes) -> None:
        with contextlib.suppress(Exception):
            await self._process.write(rest)
