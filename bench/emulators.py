"""The screen emulator candidates side by side: agreement with libghostty-vt, throughput,
memory per idle screen (SPEC §26; the comparison in docs/screens.md).

    python3 bench/emulators.py                 # 2,000 streams per size, 1,000 screens
    python3 bench/emulators.py --quick         # a smoke run

Candidates, each when importable: the session's ``ScreenEmulator`` (libghostty-vt through
pyghostty), pyte 0.8.2 with the patches this project carried until the switch (the old
``screen.py``, read from git at ``--pyte-rev``), and asciinema's avt (pyavt). Install the
two that are not dependencies with ``pip install pyte==0.8.2 pyavt==0.1.2``.

- **agreement**: seeded random streams drawn from the documented set (text with wide,
  combining and ZWJ/VS16 clusters, C0, CSI cursor/erase/scroll/insert/delete/SGR/modes
  with scroll regions, DEC graphics, OSC, the alternate screen) at 80x24 and 20x7; each
  candidate's rows (trailing blanks trimmed) and cursor against libghostty-vt's own
  formatter, as streams with any difference, rows differing and cursors differing.
- **throughput**: ``seq 1 2000000`` as a PTY delivers it (16.9 MB, CRLF) in 64 KiB
  chunks, MB/s (best of 3), screen read once at the end.
- **memory**: RSS growth for 1,000 idle 80x24 screens, each fed a prompt, per screen.

Writes ``bench/results/emulators.json``.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import random
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
PYTE_REV = "5dac9a7"  # the last commit with pyte behind screen sessions

TEXT = ["hello", "a b", "日本語", "ダウンロード中 42%", "e\u0301", "👩\u200d💻", "❤\ufe0f", "🇫🇷"]
TEXT += ["x" * 30]
C0 = ["\r", "\n", "\r\n", "\b", "\t", "\x07", "\x0b", "\x0c"]
ESC = ["\x1b7", "\x1b8", "\x1bD", "\x1bE", "\x1bM", "\x1bH", "\x1b#8", "\x1b=", "\x1b>"]
GRAPHICS = ["\x1b(0", "\x1b(B", "lqqk", "x  x", "mqqj"]
OSC = ["\x1b]0;title\x07", "\x1b]2;t\x1b\\", "\x1b]133;A\x07", "\x1b]8;;x\x07"]
ALTERNATE = ["\x1b[?1049h", "\x1b[?1049l", "\x1b[?1047h", "\x1b[?1047l", "\x1b[?47h", "\x1b[?47l"]
MODES = ["\x1b[m", "\x1b[1;4;7m", "\x1b[38;5;196m", "\x1b[4h", "\x1b[4l", "\x1b[?7l", "\x1b[?7h"]
MODES += ["\x1b[?6h", "\x1b[?6l", "\x1b[?3l", "\x1b[J", "\x1b[1J", "\x1b[2J", "\x1b[K", "\x1b[1K"]


def _csi(rng: random.Random) -> str:
    n = rng.choice(["", str(rng.randint(1, 30))])
    kind = rng.randrange(3)
    if kind == 0:
        return f"\x1b[{n}{rng.choice('ABCDEFGIZ@PXLMSTdb`')}"
    if kind == 1:
        return f"\x1b[{n};{rng.randint(0, 30)}H"
    return f"\x1b[{n};{rng.randint(0, 30)}r"


def stream(rng: random.Random) -> bytes:
    pools: list[Callable[[], str]] = [
        lambda: rng.choice(TEXT),
        lambda: rng.choice(C0),
        lambda: _csi(rng),
        lambda: rng.choice(MODES),
        lambda: rng.choice(ESC),
        lambda: rng.choice(GRAPHICS),
        lambda: rng.choice(OSC),
        lambda: rng.choice(ALTERNATE),
    ]
    return "".join(rng.choice(pools)() for _ in range(rng.randint(1, 80))).encode()


class Candidate(Protocol):
    def feed(self, data: bytes) -> None: ...
    def screen(self) -> tuple[list[str], tuple[int, int]]: ...


class Ghostty:
    def __init__(self, rows: int, cols: int) -> None:
        from dsh_terminal_bash.screen import ScreenEmulator

        self.emulator = ScreenEmulator(rows, cols)

    def feed(self, data: bytes) -> None:
        self.emulator.feed(data)

    def screen(self) -> tuple[list[str], tuple[int, int]]:
        shown = self.emulator.snapshot()
        return shown.text.split("\n"), shown.cursor


def _old_pyte_module(rev: str) -> types.ModuleType | None:
    if importlib.util.find_spec("pyte") is None:
        return None
    path = f"{rev}:dsh_terminal_bash/src/dsh_terminal_bash/screen.py"
    found = subprocess.run(["git", "show", path], cwd=ROOT, capture_output=True, text=True)
    if found.returncode != 0:
        return None
    module = types.ModuleType("pyte_screen")
    exec(compile(found.stdout, "pyte_screen.py", "exec"), module.__dict__)
    return module


class PytePatched:
    module: types.ModuleType

    def __init__(self, rows: int, cols: int) -> None:
        self.emulator = self.module.ScreenEmulator(rows, cols)

    def feed(self, data: bytes) -> None:
        self.emulator.feed(data)

    def screen(self) -> tuple[list[str], tuple[int, int]]:
        shown = self.emulator.snapshot()
        return shown.text.split("\n"), tuple(shown.cursor)


class Avt:
    def __init__(self, rows: int, cols: int) -> None:
        import avt

        self.vt = avt.Vt(cols, rows)
        self.pending = b""

    def feed(self, data: bytes) -> None:
        data = self.pending + data
        text = data.decode("utf-8", "ignore")
        self.pending = b""
        self.vt.feed_str(text)

    def screen(self) -> tuple[list[str], tuple[int, int]]:
        cursor = self.vt.cursor
        return list(self.vt.text()), (cursor.row, cursor.col)


def _reference(data: bytes, rows: int, cols: int) -> tuple[list[str], tuple[int, int]]:
    from pyghostty import Terminal

    with Terminal(cols=cols, rows=rows, scrollback=0) as ref:
        ref.feed(b"\x1b[?2027h" + data)
        x, y = ref.cursor
        return ref.text().split("\n"), (min(y, rows - 1), min(x, cols - 1))


def _rows(lines: list[str], rows: int) -> list[str]:
    lines = [line.rstrip() for line in lines][:rows]
    return lines + [""] * (rows - len(lines))


def agreement(make: Callable[[int, int], Candidate], count: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for rows, cols in ((24, 80), (7, 20)):
        rng = random.Random(f"{rows}x{cols}")
        streams = differing_rows = cursors = errors = 0
        for _ in range(count):
            data = stream(rng)
            want, want_cursor = _reference(data, rows, cols)
            try:
                candidate = make(rows, cols)
                candidate.feed(data)
                got, got_cursor = candidate.screen()
            except Exception:
                errors += 1
                streams += 1
                continue
            diff = sum(a != b for a, b in zip(_rows(got, rows), _rows(want, rows), strict=True))
            differing_rows += diff
            cursors += got_cursor != want_cursor
            streams += bool(diff) or got_cursor != want_cursor
        result[f"{rows}x{cols}"] = {
            "streams": count,
            "streams_differing": streams,
            "rows_differing": differing_rows,
            "cursors_differing": cursors,
            "raised": errors,
        }
    return result


def _seq_bytes() -> bytes:
    return b"".join(b"%d\r\n" % i for i in range(1, 2_000_001))


def throughput(make: Callable[[int, int], Candidate], blob: bytes, runs: int) -> float:
    best = 0.0
    for _ in range(runs):
        candidate = make(40, 160)
        start = time.perf_counter()
        for at in range(0, len(blob), 65536):
            candidate.feed(blob[at : at + 65536])
        candidate.screen()
        best = max(best, len(blob) / (time.perf_counter() - start) / 1e6)
    return best


def _rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def memory_per_screen(make: Callable[[int, int], Candidate], screens: int) -> float:
    gc.collect()
    before = _rss_kib()
    kept = []
    for _ in range(screens):
        candidate = make(24, 80)
        candidate.feed(b"dsh> ls\r\nfile-a  file-b\r\ndsh> ")
        candidate.screen()
        kept.append(candidate)
    gc.collect()
    return (_rss_kib() - before) / screens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--pyte-rev", default=PYTE_REV)
    args = parser.parse_args()
    count, screens, runs = (200, 100, 1) if args.quick else (2000, 1000, 3)
    candidates: dict[str, Callable[[int, int], Candidate]] = {"libghostty-vt": Ghostty}
    old = _old_pyte_module(args.pyte_rev)
    if old is not None:
        PytePatched.module = old
        candidates["pyte 0.8.2 + patches"] = PytePatched
    if importlib.util.find_spec("avt") is not None:
        candidates["avt (pyavt)"] = Avt
    blob = _seq_bytes()
    report: dict[str, Any] = {"seq_mb": len(blob) / 1e6}
    for name, make in candidates.items():
        # Each in a fresh measurement order: memory first, before throughput's garbage.
        row = {
            "memory_kib_per_idle_80x24": round(memory_per_screen(make, screens), 1),
            "agreement": agreement(make, count),
            "seq_mb_per_s": round(throughput(make, blob, runs), 2),
        }
        report[name] = row
        print(name, json.dumps(row), flush=True)
    out = Path(__file__).parent / "results" / "emulators.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
