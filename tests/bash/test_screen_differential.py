"""A differential test against libghostty-vt: the screen the model is shown is the
reference's screen, cell for cell (SPEC §26).

The reference is ``pyghostty.Terminal`` used as its authors ship it, fed each stream whole
and read through Ghostty's own plain-text formatter. The side under test is the session's
:class:`ScreenEmulator`, fed the same bytes in arbitrary pieces with screens read in
between, and read through its own cell walk (text, cursor, the screen shown). Both are the
same native core, so a difference is this project's: the chunking, the DECXCPR split, the
cell walk's handling of wide characters and clusters, the trimming.

The streams are drawn from the set SPEC §26 documents: printable text with wide,
combining and ZWJ/VS16 clusters; C0 controls; CSI cursor movement, erase, scroll,
insert/delete, SGR and modes, with scroll regions; DEC special graphics; OSC; the
alternate screen; at 80x24 and 20x7. The pyte emulator this replaced differed on these
streams; ``bench/emulators.py`` counts by how much.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pyghostty import Terminal

from dsh_terminal_bash.screen import ScreenEmulator

TEXT = st.sampled_from(
    [
        "hello",
        "a b",
        "日本語",
        "ダウンロード中 42%",
        "e\u0301",
        "👩\u200d💻",
        "❤\ufe0f",
        "🇫🇷",
        "👍🏽",
        "x" * 30,
        "|",
    ]
).map(str.encode)
C0 = st.sampled_from([b"\r", b"\n", b"\r\n", b"\b", b"\t", b"\x07", b"\x0b", b"\x0c"])
_N = st.integers(min_value=0, max_value=30).map(lambda n: b"%d" % n if n else b"")
CSI = st.one_of(
    st.tuples(_N, st.sampled_from(b"ABCDEFGIZ@PXLMSTdGb`")).map(
        lambda t: b"\x1b[" + t[0] + bytes([t[1]])
    ),
    st.tuples(_N, _N).map(lambda t: b"\x1b[" + t[0] + b";" + t[1] + b"H"),
    st.sampled_from([b"\x1b[J", b"\x1b[1J", b"\x1b[2J", b"\x1b[K", b"\x1b[1K", b"\x1b[2K"]),
    st.tuples(_N, _N).map(lambda t: b"\x1b[" + t[0] + b";" + t[1] + b"r"),
    st.sampled_from(
        [
            b"\x1b[m",
            b"\x1b[1;4;7m",
            b"\x1b[38;5;196m",
            b"\x1b[48;2;10;20;30m",
            b"\x1b[4h",
            b"\x1b[4l",
            b"\x1b[?7l",
            b"\x1b[?7h",
            b"\x1b[?6h",
            b"\x1b[?6l",
            b"\x1b[?25l",
            b"\x1b[?3l",
            b"\x1b[6n",
            b"\x1b[?6n",
            b"\x1b[c",
            b"\x1b[!p",
        ]
    ),
)
ESC = st.sampled_from(
    [b"\x1b7", b"\x1b8", b"\x1bD", b"\x1bE", b"\x1bM", b"\x1bH", b"\x1b#8", b"\x1b=", b"\x1b>"]
)
GRAPHICS = st.sampled_from([b"\x1b(0", b"\x1b(B", b"lqqk", b"x  x", b"mqqj", b"\x0e", b"\x0f"])
OSC = st.sampled_from(
    [b"\x1b]0;title\x07", b"\x1b]2;t\x1b\\", b"\x1b]133;A\x07", b"\x1b]10;?\x07", b"\x1b]8;;x\x07"]
)
ALTERNATE = st.sampled_from(
    [b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b[?1047h", b"\x1b[?1047l", b"\x1b[?47h", b"\x1b[?47l"]
)
STREAM = st.lists(st.one_of(TEXT, C0, CSI, ESC, GRAPHICS, OSC, ALTERNATE), max_size=80).map(
    b"".join
)


def _reference(data: bytes, rows: int, cols: int) -> tuple[list[str], tuple[int, int], bool]:
    with Terminal(cols=cols, rows=rows, scrollback=0) as ref:
        ref.feed(b"\x1b[?2027h" + data)  # grapheme clustering, as the session's default
        lines = ref.text().split("\n")
        x, y = ref.cursor
        alternate = ref.get("active_screen", "int") != 0
    return _padded(lines, rows), (min(y, rows - 1), min(x, cols - 1)), alternate


def _padded(lines: list[str], rows: int) -> list[str]:
    lines = [line.rstrip() for line in lines][:rows]
    return lines + [""] * (rows - len(lines))


@settings(max_examples=300, deadline=None)
@given(
    data=STREAM,
    size=st.sampled_from([(24, 80), (7, 20)]),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
)
def test_the_screen_matches_libghostty_vt_cell_for_cell(
    data: bytes, size: tuple[int, int], cuts: list[int]
) -> None:
    rows, cols = size
    screen = ScreenEmulator(rows=rows, cols=cols)
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        screen.feed(data[start:cut])
        start = cut
        screen.snapshot()  # reading in between must not change the outcome
    screen.feed(data[start:])
    shown = screen.snapshot()
    lines, cursor, alternate = _reference(data, rows, cols)
    assert _padded(shown.text.split("\n"), rows) == lines
    assert shown.cursor == cursor
    assert shown.alternate == alternate
    assert screen.rebuilds == 0
