"""The screen emulator: alternate screen, drawn-output detection, the bulk fast path."""

from __future__ import annotations

import pyte
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_terminal_bash.screen import ScreenEmulator


def test_leaving_the_alternate_screen_restores_the_primary_screen_and_cursor() -> None:
    screen = ScreenEmulator(rows=5, cols=20)
    screen.feed(b"$ echo hi\r\nhi\r\n$ vim")
    before = screen.snapshot()
    screen.feed(b"\x1b[?1049h\x1b[H\x1b[2Jfile line\r\n~\r\n\x1b[5;1H:wq")
    inside = screen.snapshot()
    assert inside.alternate
    assert inside.text == "file line\n~\n\n\n:wq"
    assert inside.cursor == (4, 3)
    screen.feed(b"\x1b[?1049l")
    after = screen.snapshot()
    assert not after.alternate
    assert after.text == before.text == "$ echo hi\nhi\n$ vim"
    assert after.cursor == before.cursor == (2, 5)


def test_modes_1047_and_47_switch_screens_too() -> None:
    for mode in (b"1047", b"47"):
        screen = ScreenEmulator(rows=3, cols=10)
        screen.feed(b"primary")
        screen.feed(b"\x1b[?" + mode + b"h" + b"alt")
        assert screen.snapshot().text.startswith("primary") is False
        assert screen.alternate
        screen.feed(b"\x1b[?" + mode + b"l")
        assert screen.snapshot().text == "primary"
        assert not screen.alternate


def test_cursor_addressing_marks_the_output_as_drawn() -> None:
    screen = ScreenEmulator(rows=4, cols=10)
    screen.feed(b"plain line\r\n")
    assert screen.take_drawn() is False
    screen.feed(b"\x1b[2;3Hx")
    assert screen.take_drawn() is True
    assert screen.take_drawn() is False


def test_resize_changes_the_visible_size() -> None:
    screen = ScreenEmulator(rows=4, cols=10)
    screen.resize(6, 30)
    assert (screen.rows, screen.cols) == (6, 30)
    screen.feed(b"x" * 25)
    assert screen.snapshot().text == "x" * 25


def test_a_resize_on_the_alternate_screen_keeps_the_primary_screen_within_bounds() -> None:
    screen = ScreenEmulator(rows=6, cols=20)
    screen.feed(b"\r\n".join(b"row %d is long enough" % i for i in range(6)))
    screen.feed(b"\x1b[?1049h")
    screen.resize(3, 8)
    screen.feed(b"\x1b[?1049l")
    snap = screen.snapshot()
    assert len(snap.text.split("\n")) <= 3
    assert all(len(line) <= 8 for line in snap.text.split("\n"))


def test_bulk_output_moves_at_a_multiple_of_the_plain_emulator() -> None:
    # Not a timing assertion: the fast path must skip most lines, which shows as far fewer
    # characters drawn than were fed.
    screen = ScreenEmulator(rows=40, cols=160)
    drawn = 0
    original = screen._screen.draw

    def counting(data: str) -> None:
        nonlocal drawn
        drawn += len(data)
        original(data)

    screen._screen.draw = counting  # type: ignore[method-assign]
    blob = b"".join(b"build step %d ok \x1b[32mgreen\x1b[0m\r\n" % i for i in range(50_000))
    for start in range(0, len(blob), 4096):
        screen.feed(blob[start : start + 4096])
    snap = screen.snapshot()
    assert snap.text.split("\n")[-2] == "build step 49999 ok green"
    assert drawn < len(blob) // 20


_line = st.text(alphabet=st.sampled_from("ab é\t"), max_size=60).map(str.encode)
_end = st.sampled_from(
    [
        b"\r\n",
        b"\r\n",
        b"\r",
        b"\n",
        b"\x1b[1mB\x1b[0m\r\n",
        b"\x1b[K\r\n",
        b"\x1b[H",
        b"\x1b[3A",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1bM",
        b"\x0e",
        b"\x0f",
        b"\x1b[2;5r",
        b"\x1b]133;D;0\x07dsh> ",
        b"\x1b[?2004h",
        b"\x1b7",
        b"\x1b8",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    body=st.lists(st.tuples(_line, _end), max_size=120),
    piece=st.integers(min_value=1, max_value=3000),
    head=st.sampled_from([b"", b"\x1b[H\x1b[2Jtop\r\nleft", b"partial \xc3"]),
)
def test_the_lazy_fast_path_shows_exactly_what_a_plain_emulator_shows(
    body: list[tuple[bytes, bytes]], piece: int, head: bytes
) -> None:
    data = head + b"".join(line + end for line, end in body)
    fast = ScreenEmulator(rows=6, cols=24)
    for start in range(0, len(data), piece):
        fast.feed(data[start : start + piece])
        if start % (piece * 3) == 0:
            fast.snapshot()  # looking in between must not change the outcome
    reference = ScreenEmulator(rows=6, cols=24)
    reference._stream.feed(data)  # every byte through pyte, no skipping
    assert fast.snapshot() == reference.snapshot()


def test_pyte_itself_lacks_the_alternate_screen() -> None:
    # Why _Screen exists: with plain pyte, leaving vim would leave its screen behind.
    plain = pyte.Screen(10, 3)
    stream = pyte.ByteStream(plain)
    stream.feed(b"primary\x1b[?1049h\x1b[2J\x1b[Halt\x1b[?1049l")
    assert plain.display[0].rstrip() != "primary"
