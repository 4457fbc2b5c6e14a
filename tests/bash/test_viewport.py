"""Viewport buffers: tail kept within the byte bound, consuming reads never repeat."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_terminal_bash.viewport import (
    HEAD_TAIL_MIN_BYTES,
    MARKER_ROOM,
    TailBuffer,
    ViewportBuffer,
)
from dsh_terminal_core.kernel.textbounds import utf8_len, utf8_tail

pieces = st.lists(st.text(alphabet="ab€𝄞\n", max_size=12), max_size=30)


@settings(max_examples=300, deadline=None)
@given(pieces, st.integers(1, 25))
def test_tail_buffer_is_the_tail_of_everything(texts: list[str], bound: int) -> None:
    buf = TailBuffer(bound)
    whole = ""
    for text in texts:
        buf.append(text)
        whole += text
        got = buf.text()
        assert got == utf8_tail(whole, bound)[0]
        assert utf8_len(got) <= bound
        assert buf.truncated == (utf8_len(whole) > bound)


@settings(max_examples=300, deadline=None)
@given(pieces, st.lists(st.booleans(), max_size=30), st.integers(1, 25))
def test_read_new_returns_each_piece_once(texts: list[str], reads: list[bool], bound: int) -> None:
    vb = ViewportBuffer(bound)
    whole = pending = ""
    for text, read in zip(texts, reads + [False] * len(texts), strict=False):
        vb.append(text)
        whole += text
        pending += text
        if read:
            assert vb.read_new() == (utf8_tail(pending, bound)[0], utf8_len(pending) > bound)
            pending = ""
    assert vb.read_new() == (utf8_tail(pending, bound)[0], utf8_len(pending) > bound)
    assert vb.read_new() == ("", False)
    assert vb.text() == utf8_tail(whole, bound)[0]
    assert vb.truncated == (utf8_len(whole) > bound)


def test_single_huge_piece_is_cut_on_append() -> None:
    buf = TailBuffer(10)
    buf.append("x" * 1000 + "€end")
    assert buf.text() == "xxxx€end" and buf.truncated


def test_clear_forgets_truncation() -> None:
    buf = TailBuffer(3)
    buf.append("abcdef")
    buf.clear()
    assert (buf.text(), buf.truncated) == ("", False)


def test_rejects_non_positive_bound() -> None:
    with pytest.raises(ValueError):
        TailBuffer(0)
    with pytest.raises(ValueError):
        ViewportBuffer(-1)


def _best_time(total: int) -> float:
    # CPU time of this process, best of several: wall time on a loaded machine grows
    # with whatever else runs, which says nothing about how the work grows.
    best = float("inf")
    for _ in range(5):
        vb = ViewportBuffer(256 * 1024)
        start = time.process_time()
        for _ in range(total // 4096):
            vb.append("q" * 4095 + "\n")
        vb.text()
        best = min(best, time.process_time() - start)
    return best


def test_cost_is_linear() -> None:
    ratio = _best_time(40_000_000) / _best_time(10_000_000)
    assert ratio < 10, ratio


# --- head and tail ----------------------------------------------------------------------

MARKER = re.compile(
    r"\[… (?:(\d+) lines \((\d+) bytes\) omitted: lines (\d+)-(\d+)|(\d+) bytes of line (\d+) "
    r"omitted); read (?:them|it) with terminal_read offset=(\d+) …\]\n"
)
line_lists = st.lists(st.text(alphabet="ab€𝄞", max_size=300), min_size=1, max_size=400)


@pytest.mark.parametrize("counted", [False, True], ids=["counts", "told-counts"])
@settings(max_examples=300, deadline=None)
@given(line_lists, st.integers(1024, 6000), st.integers(0, 10_000), st.integers(1, 97))
def test_head_and_tail_survive_and_the_marker_names_the_missing_lines(
    counted: bool, lines: list[str], bound: int, first_line: int, piece: int
) -> None:
    whole = "\n".join(lines) + "\n"
    vb = ViewportBuffer(bound, first_line)
    for start in range(0, len(whole), piece):
        part = whole[start : start + piece]
        # The session passes the count the scrollback made; it must mean the same.
        vb.append(part, part.count("\n") if counted else None)
    got = vb.text()
    assert utf8_len(got) <= bound
    if utf8_len(whole) <= bound - MARKER_ROOM:
        assert (got, vb.truncated) == (whole, False)
        return
    if not vb.truncated:
        assert got == whole
        return
    found = MARKER.search(got)
    assert found is not None, got
    head, tail = got[: found.start()].removesuffix("\n"), got[found.end() :]
    assert whole.startswith(head) and whole.endswith(tail)
    assert head and tail  # both ends are shown
    offset = int(found.group(7))
    begin = int(found.group(3) or found.group(6))
    end = int(found.group(4) or found.group(6))
    assert offset == begin and end >= begin
    # The numbers are absolute 1-based lines: the omitted text lies on exactly those lines.
    start_index = begin - 1 - first_line
    end_index = end - 1 - first_line
    omitted = whole[len(head) : len(whole) - len(tail)]
    assert omitted  # something really is missing
    # The line of a character is the number of newlines before it.
    line_of_first = whole[: len(head)].count("\n")
    line_of_last = whole[: len(whole) - len(tail) - 1].count("\n")
    assert (start_index, end_index) == (line_of_first, line_of_last)
    stated = int(found.group(2) or found.group(5))
    assert stated == utf8_len(omitted)


def test_a_builds_first_error_survives_a_flood() -> None:
    vb = ViewportBuffer(32 * 1024, first_line=41)
    vb.append("compiling...\nerror: first thing that broke\n")
    for n in range(100_000):
        vb.append(f"warning {n}: noise\n")
    vb.append("make: *** [all] Error 1\n")
    text = vb.text()
    assert text.startswith("compiling...\nerror: first thing that broke\n")
    assert text.endswith("make: *** [all] Error 1\n")
    assert utf8_len(text) <= 32 * 1024 and vb.truncated
    assert text.count("[… ") == 1


def test_small_bounds_keep_only_the_tail() -> None:
    vb = ViewportBuffer(HEAD_TAIL_MIN_BYTES - 1)
    vb.append("first\n" + "x\n" * 5000 + "last\n")
    assert vb.text().endswith("last\n") and "first" not in vb.text() and "[…" not in vb.text()


def test_output_that_fills_the_head_exactly_and_then_goes_on_is_kept_whole() -> None:
    bound = 4096
    head_room = (bound - MARKER_ROOM) // 2
    vb = ViewportBuffer(bound)
    vb.append("h" * head_room)  # the head is full, nothing has reached the tail yet
    assert (vb.text(), vb.truncated) == ("h" * head_room, False)
    vb.append("t\n")
    assert (vb.text(), vb.truncated) == ("h" * head_room + "t\n", False)
    assert vb.read_new() == ("h" * head_room + "t\n", False)
