"""esctest2 run headless against the screen sessions' emulator (SPEC §26).

    python3 bench/esctest.py /path/to/esctest2          # a checkout, fetched separately
    python3 bench/esctest.py /path/to/esctest2 --include '^DECSTBM'

esctest2 (Thomas Dickey's conformance tests) runs in a terminal: it writes sequences and
reads the terminal's reports, and it reads the screen back one cell at a time with
DECRQCRA checksums. This bridge is that terminal: it runs esctest2 on a PTY, feeds its
output to the session's ``ScreenEmulator`` and writes back the replies the emulator gives
(as a session does), and answers DECRQCRA itself from the emulated screen, since
libghostty-vt does not. The repository holds none of esctest2's code; pass the path of a
checkout. Prints the pass and fail counts (VT level <= 4, ``--expected-terminal xterm``)
and writes the failing tests to ``bench/results/esctest.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from dsh_terminal_bash.screen import ScreenEmulator

_DECRQCRA = re.compile(rb"\x1b\[(\d*);(\d*);(\d*);(\d*);(\d*);(\d*)\*y")


class _Reference:
    """libghostty-vt as pyghostty ships it (``--reference``), given only what the library
    leaves to its embedder (the window size): what the session's emulator is compared
    against, with the same bridge around it."""

    def __init__(self, rows: int, cols: int) -> None:
        from pyghostty import Terminal

        self.rows, self.cols = rows, cols
        self._terminal = Terminal(cols=cols, rows=rows, scrollback=0)
        self._replies = bytearray()
        self._terminal.on_reply(self._replies.extend)
        # The window size is the embedder's to give (CSI 18t); esctest asks it first.
        from pyghostty import ffi, lib

        def size(_terminal: object, _userdata: object, out: Any) -> bool:
            out.rows, out.columns, out.cell_width, out.cell_height = rows, cols, 8, 16
            return True

        self._size = ffi.callback("GhosttyTerminalSizeFn", size)
        handle = self._terminal._t[0]
        lib.ghostty_terminal_set(handle, lib.GHOSTTY_TERMINAL_OPT_SIZE, self._size)

    def feed(self, data: bytes) -> bytes:
        self._terminal.feed(data)
        replies = bytes(self._replies)
        self._replies.clear()
        return replies

    def lines(self) -> list[str]:
        lines = self._terminal.text().split("\n")[: self.rows]
        return lines + [""] * (self.rows - len(lines))


class _Session:
    """The session's ``ScreenEmulator``."""

    def __init__(self, rows: int, cols: int) -> None:
        self.screen = ScreenEmulator(rows, cols)
        self.rows, self.cols = rows, cols

    def feed(self, data: bytes) -> bytes:
        return self.screen.feed(data)

    def lines(self) -> list[str]:
        return self.screen._vt.lines()


def _checksum(screen: _Session | _Reference, top: int, left: int, bottom: int, right: int) -> int:
    """xterm's DECRQCRA sum before patch 279 (esctest negates it back): blanks count as
    spaces, which esctest reads as the empty cells DEC terminals trim."""
    lines = screen.lines()
    total = 0
    for row in range(top - 1, min(bottom, screen.rows)):
        line = lines[row]
        for col in range(left - 1, min(right, screen.cols)):
            total += ord(line[col]) if col < len(line) else 32
    return (0x10000 - total) & 0xFFFF


def _feed(screen: _Session | _Reference, data: bytes) -> bytes:
    replies = bytearray()
    start = 0
    for match in _DECRQCRA.finditer(data):
        replies += screen.feed(data[start : match.end()])
        start = match.end()
        pid = match.group(1).decode() or "0"
        top, left, bottom, right = (int(v or 1) for v in match.groups()[2:])
        if not match.group(5):
            bottom = screen.rows
        if not match.group(6):
            right = screen.cols
        value = _checksum(screen, top, left, bottom, right)
        replies += f"\x1bP{pid}!~{value:04X}\x1b\\".encode()
    replies += screen.feed(data[start:])
    return replies


def run(esctest: Path, include: str, timeout: float, reference: bool) -> dict[str, object]:
    log = Path(f"/tmp/esctest-bridge-{'reference' if reference else 'session'}.log")
    argv = [
        sys.executable,
        str(esctest / "esctest" / "esctest.py"),
        "--expected-terminal=xterm",
        "--max-vt-level=4",
        f"--include={include}",
        f"--logfile={log}",
        f"--timeout={timeout}",
        "--no-print-logs",
        "--v=2",
    ]
    pid, fd = pty.fork()
    if pid == 0:  # the child: esctest2 on the PTY
        os.environ["TERM"] = "xterm-256color"
        os.execv(argv[0], argv)
    screen = _Reference(24, 80) if reference else _Session(24, 80)
    pending = b""
    started = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 30)
            if not ready:
                break
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            data = pending + data
            # A DECRQCRA split at the read's end waits for the rest.
            cut = data.rfind(b"\x1b")
            pending = b""
            if cut >= 0 and not re.search(rb"[@-~]", data[cut + 2 :]) and len(data) - cut < 32:
                data, pending = data[:cut], data[cut:]
            replies = _feed(screen, data)
            if replies:
                os.write(fd, replies)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
    text = log.read_text(errors="replace") if log.exists() else ""
    summary = re.findall(
        r"^\*\*\* (\d+) tests? passed, (\d+) known bugs?, (\d+) (?:tests?|TESTS?)", text, re.M
    )
    failing = text.split("Failing tests:\n", 1)[1].split() if "Failing tests:" in text else []
    passed, known, failed = (int(v) for v in summary[-1]) if summary else (0, 0, 0)
    return {
        "seconds": round(time.monotonic() - started, 1),
        "passed": passed,
        "known_bugs": known,
        "failed": failed,
        "failing": failing,
        "log": str(log),
    }


def _classes(esctest: Path) -> list[str]:
    """esctest2's test classes: each is run in a process of its own, so a report one test
    left unread cannot fail the tests after it in other classes."""
    found: set[str] = set()
    for source in (esctest / "esctest" / "tests").glob("*.py"):
        found.update(re.findall(r"^class (\w+)\(", source.read_text(), re.M))
    return sorted(found)


def run_all(esctest: Path, timeout: float, reference: bool) -> dict[str, object]:
    passed = known = failed = 0
    failing: list[str] = []
    started = time.monotonic()
    for name in _classes(esctest):
        result = run(esctest, rf"^{name}\.", timeout, reference)
        passed += int(result["passed"])  # type: ignore[call-overload]
        known += int(result["known_bugs"])  # type: ignore[call-overload]
        failed += int(result["failed"])  # type: ignore[call-overload]
        failing += result["failing"]  # type: ignore[arg-type]
    return {
        "seconds": round(time.monotonic() - started, 1),
        "passed": passed,
        "known_bugs": known,
        "failed": failed,
        "failing": failing,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("esctest", type=Path, help="an esctest2 checkout")
    parser.add_argument("--include", default=None, help="one run of these tests only")
    parser.add_argument("--timeout", type=float, default=0.3)
    parser.add_argument("--reference", action="store_true", help="run libghostty-vt bare")
    args = parser.parse_args()
    if args.include is None:
        result = run_all(args.esctest, args.timeout, args.reference)
    else:
        result = run(args.esctest, args.include, args.timeout, args.reference)
    print(json.dumps({k: v for k, v in result.items() if k != "failing"}, indent=2))
    name = "esctest-reference.json" if args.reference else "esctest.json"
    out = Path(__file__).parent / "results" / name
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
