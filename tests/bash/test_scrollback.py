"""Scrollback: both bounds, absolute numbering, paging, incremental tails, linear cost.

The property tests run the scrollback beside a naive list model of the documented rules,
with tiny block and window sizes so every multi-block path is exercised.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_terminal_core.registry.scrollback as scrollback_module
from dsh_terminal_core.kernel.textbounds import utf8_head, utf8_len, utf8_tail
from dsh_terminal_core.registry.scrollback import Scrollback

Page = tuple[str, int, int, int, bool]
"""A read as (text, total_lines, line_begin, line_end, truncated)."""


class Naive:
    """The retention rules, written the obvious way."""

    def __init__(self, max_lines: int, max_bytes: int) -> None:
        self.max_lines, self.max_bytes = max_lines, max_bytes
        self.lines: list[str] = []
        self.first = 0
        self.complete = 0
        self.open: str | None = None
        self.dropped = False

    def append(self, text: str) -> None:
        if not text:
            return
        parts = text.split("\n")
        if len(parts) == 1:
            self.open = (self.open or "") + text
        else:
            done = [(self.open or "") + parts[0], *parts[1:-1]]
            if not self.lines:
                self.first = self.complete
            self.lines += done
            self.complete += len(done)
            self.open = parts[-1] or None
        if self.open is not None and utf8_len(self.open) > self.max_bytes:
            self.open = utf8_tail(self.open, self.max_bytes)[0]
            self.dropped = True
        while len(self.lines) > self.max_lines - (self.open is not None):
            self.pop()
        budget = self.max_bytes - utf8_len(self.open or "")
        while sum(utf8_len(line) + 1 for line in self.lines) > budget:
            if len(self.lines) == 1 and (self.open is None or budget > 1):
                self.lines[0] = utf8_tail(self.lines[0], budget - 1)[0]
                self.dropped = True
                break
            self.pop()

    def pop(self) -> None:
        self.lines.pop(0)
        self.first += 1
        self.dropped = True

    @property
    def total_lines(self) -> int:
        return self.complete + (self.open is not None)

    @property
    def first_line(self) -> int:
        return self.first if self.lines else self.complete

    def numbered(self) -> dict[int, str]:
        found = {self.first + i: line for i, line in enumerate(self.lines)}
        if self.open is not None:
            found[self.complete] = self.open
        return found

    def read(self, offset: int, count: int, max_bytes: int) -> Page:
        truncated = offset < self.first_line
        begin = min(max(offset, self.first_line), self.total_lines)
        end = min(begin + count, self.total_lines)
        numbered = self.numbered()
        lines = [numbered[n] for n in range(begin, end)]
        taken = len(lines)
        while taken and utf8_len("\n".join(lines[:taken])) > max_bytes:
            taken -= 1
            truncated = True
        if taken:
            text = "\n".join(lines[:taken])
        elif lines:
            text, taken, truncated = utf8_head(lines[0], max_bytes)[0], 1, True
        else:
            text = ""
        return text, self.total_lines, begin, begin + taken, truncated

    def retained_text(self) -> str:
        return "".join(line + "\n" for line in self.lines) + (self.open or "")


@contextmanager
def small_blocks(bulk_lines: int | None = None, merge_chars: int = 8) -> Iterator[None]:
    """Shrink blocks and trim windows so tiny inputs cross every block boundary.

    ``bulk_lines`` also lowers the count of lines from which an append is stored packed
    without splitting, so tiny inputs take the bulk path too, and ``merge_chars`` how
    short the newest packed block must be to take such lines in.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scrollback_module, "_BLOCK_LINES", 3)
        patch.setattr(scrollback_module, "_WINDOW", 2)
        if bulk_lines is not None:
            patch.setattr(scrollback_module, "_BULK_LINES", bulk_lines)
            patch.setattr(scrollback_module, "_MERGE_CHARS", merge_chars)
        yield


def read_tuple(sb: Scrollback, offset: int, count: int, max_bytes: int) -> Page:
    """A read by 0-based position, as the model counts (``Scrollback.read`` from 1)."""
    r = sb.read(offset + 1, count, max_bytes)
    return r.text, r.total_lines, r.line_begin - 1, r.line_end, r.truncated


def assert_same(sb: Scrollback, model: Naive) -> None:
    assert sb.total_lines == model.total_lines
    assert sb.first_line == model.first_line
    assert sb.dropped == model.dropped
    assert sb.retained_lines == len(model.numbered())
    assert sb.retained_bytes == utf8_len(model.retained_text())
    assert sb.retained_lines <= model.max_lines and sb.retained_bytes <= model.max_bytes
    assert read_tuple(sb, 0, 10**9, 10**9) == model.read(0, 10**9, 10**9)
    assert sb.tail_text(10**9) == model.retained_text()
    assert_snapshot_is_the_lines(sb, model)


def assert_snapshot_is_the_lines(sb: Scrollback, model: Naive) -> None:
    """``retained()`` holds every retained line once, in order, numbered as ``read``."""
    retained = sb.retained()
    numbered = model.numbered()
    assert (retained.line_begin, retained.line_end) == (model.first_line, model.total_lines)
    assert "".join(text for _, text in retained.segments) == "".join(
        numbered[n] + "\n" for n in sorted(numbered)
    )
    at = retained.line_begin
    for first, text in retained.segments:
        assert first == at and text.endswith("\n")
        at += text.count("\n")
    assert at == retained.line_end


PIECES = ["a", "bc", "é", "€", "𝄞", "\n", "\n\n", "line\n", "x" * 17, "日本\n語", "tail"]
appends = st.lists(st.lists(st.sampled_from(PIECES), max_size=6).map("".join), max_size=40)


@settings(max_examples=300, deadline=None)
@given(appends, st.integers(1, 6), st.integers(1, 40), st.data())
def test_matches_naive_model(
    texts: list[str], max_lines: int, max_bytes: int, data: st.DataObject
) -> None:
    with small_blocks():
        check_against_model(texts, max_lines, max_bytes, data)


@settings(max_examples=400, deadline=None)
@given(
    appends, st.integers(1, 6), st.integers(1, 40), st.integers(1, 3), st.integers(0, 30), st.data()
)
def test_bulk_appends_match_naive_model(
    texts: list[str],
    max_lines: int,
    max_bytes: int,
    bulk_lines: int,
    merge_chars: int,
    data: st.DataObject,
) -> None:
    """Appends completing a few lines are stored packed (in blocks of their own or joined
    to a small packed block), mixed with list blocks."""
    with small_blocks(bulk_lines, merge_chars):
        check_against_model(texts, max_lines, max_bytes, data)


def test_bursts_of_short_lines_share_packed_blocks() -> None:
    sb = Scrollback(1_000_000, 1 << 20)
    burst = "\n" * 70 + "x"
    for _ in range(2000):
        sb.append(burst)
    # 140,000 lines in bursts of 70: a block per burst would be 2,000 blocks.
    assert len(sb._blocks) < 40
    assert sb.total_lines == 140_001 and sb.open_line == "x"
    assert sb.lines_since(139_930)[0] == ["x"] + [""] * 69


def test_bulk_output_is_stored_without_line_objects() -> None:
    sb = Scrollback(1_000_000, 1 << 20)
    text = "".join(f"{i}\n" for i in range(100_000))
    for start in range(0, len(text), 40_000):
        sb.append(text[start : start + 40_000])
    blocks = list(sb._blocks)
    assert blocks and all(isinstance(b.lines, scrollback_module._Packed) for b in blocks)
    assert len(blocks) < 20
    model = Naive(1_000_000, 1 << 20)
    for start in range(0, len(text), 40_000):
        model.append(text[start : start + 40_000])
    assert_same(sb, model)


def check_against_model(
    texts: list[str], max_lines: int, max_bytes: int, data: st.DataObject
) -> None:
    sb, model = Scrollback(max_lines, max_bytes), Naive(max_lines, max_bytes)
    cursor = model_cursor = 0
    for text in texts:
        assert sb.append(text) == text.count("\n")
        model.append(text)
        assert_same(sb, model)
        offset = data.draw(st.integers(0, model.total_lines + 2))
        count = data.draw(st.integers(0, 8))
        budget = data.draw(st.integers(0, 30))
        assert read_tuple(sb, offset, count, budget) == model.read(offset, count, budget)
        budget = data.draw(st.integers(0, 50))
        assert sb.tail_text(budget) == utf8_tail(model.retained_text(), budget)[0]
        got, cursor = sb.lines_since(cursor)
        numbered = model.numbered()
        want = [numbered[n] for n in range(max(model_cursor, model.first_line), model.complete)]
        model_cursor = max(model_cursor, model.complete)
        assert (got, cursor) == (want, model_cursor)


def test_small_blocks_really_cross_blocks() -> None:
    with small_blocks():
        sb = Scrollback(100, 10_000)
        for i in range(20):
            sb.append(f"{i}\n")
        assert len(sb._blocks) > 3


# -- bounds --------------------------------------------------------------------------------


def test_line_bound_keeps_the_tail_and_numbers_absolutely() -> None:
    sb = Scrollback(max_lines=3, max_bytes=1000)
    sb.append("".join(f"l{i}\n" for i in range(10)))
    assert (sb.total_lines, sb.first_line, sb.dropped) == (10, 7, True)
    r = sb.read(8, 10, 1000)
    assert (r.text, r.line_begin, r.line_end, r.truncated) == ("l7\nl8\nl9", 8, 10, False)
    sb.append("open")
    assert (sb.total_lines, sb.first_line) == (11, 8)  # the open line counts against the bound
    assert sb.read(1, 10, 1000).text == "l8\nl9\nopen"


def test_byte_bound_drops_whole_lines() -> None:
    sb = Scrollback(max_lines=100, max_bytes=10)
    sb.append("aaa\nbbb\nccc\n")
    assert sb.read(1, 10, 100).text == "bbb\nccc"
    assert sb.retained_bytes == 8 and sb.dropped


def test_single_line_over_byte_bound_keeps_its_tail() -> None:
    sb = Scrollback(max_lines=10, max_bytes=8)
    sb.append("0123456789abc\n")
    assert sb.read(1, 1, 100).text == "6789abc"
    assert sb.retained_bytes == 8
    sb.append("é" * 10)
    assert sb.read(2, 1, 100).text == "éééé" and sb.retained_bytes == 8


def test_open_line_grows_and_completes() -> None:
    sb = Scrollback()
    for piece in ("dsh", "> ", "echo"):
        sb.append(piece)
    assert sb.total_lines == 1 and sb.lines_since(0) == ([], 0)
    sb.append(" hi\nhi\n")
    assert sb.lines_since(0) == (["dsh> echo hi", "hi"], 2)
    assert sb.total_lines == 2


def test_lines_since_never_resends_and_survives_trimming() -> None:
    sb = Scrollback(max_lines=5, max_bytes=10_000)
    cursor = 0
    seen: list[str] = []
    for i in range(20):
        sb.append(f"n{i}\n")
        if i % 3 == 0:
            lines, cursor = sb.lines_since(cursor)
            seen += lines
    lines, cursor = sb.lines_since(cursor)
    seen += lines
    assert cursor == 20
    assert len(seen) == len(set(seen))
    assert seen[-5:] == [f"n{i}" for i in range(15, 20)]
    stale, cursor = sb.lines_since(0)
    assert stale == [f"n{i}" for i in range(15, 20)] and cursor == 20


def test_read_paging_by_bytes_always_advances() -> None:
    sb = Scrollback()
    sb.append("short\n" + "y" * 50 + "\nend\n")
    r = sb.read(1, 10, 20)
    assert (r.text, r.line_end, r.truncated) == ("short", 1, True)
    r = sb.read(r.line_end + 1, 10, 20)
    assert (r.text, r.line_end, r.truncated) == ("y" * 20, 2, True)
    r = sb.read(r.line_end + 1, 10, 20)
    assert (r.text, r.line_end, r.truncated) == ("end", 3, False)


def test_read_cuts_on_code_points() -> None:
    sb = Scrollback()
    sb.append("€€€\n")
    r = sb.read(1, 1, 7)
    assert r.text == "€€" and r.truncated


def test_read_offset_below_first_line_starts_there() -> None:
    sb = Scrollback(max_lines=2)
    sb.append("a\nb\nc\nd\n")
    r = sb.read(1, 1, 100)
    assert (r.text, r.line_begin, r.line_end, r.truncated, r.total_lines) == ("c", 3, 3, True, 4)
    r = sb.read(10, 5, 100)
    assert (r.text, r.line_begin, r.line_end, r.truncated) == ("", 5, 4, False)  # none


def test_tail_text() -> None:
    sb = Scrollback()
    sb.append("one\ntwo\nthr€e")
    assert sb.tail_text(100) == "one\ntwo\nthr€e"
    assert sb.tail_text(6) == "hr€e"
    assert sb.tail_text(5) == "r€e"
    assert sb.tail_text(4) == "€e"
    assert sb.tail_text(3) == "e"


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Scrollback(max_lines=0)
    with pytest.raises(ValueError):
        Scrollback(max_bytes=0)
    with pytest.raises(ValueError):
        Scrollback().read(0, 1, 10)


@pytest.mark.parametrize("chunk", [3001, 40_001])
@pytest.mark.parametrize("line", ["{i:07d} é\n", "{i}\n"])
def test_many_lines_across_blocks_match_model(chunk: int, line: str) -> None:
    sb, model = Scrollback(1000, 20_000), Naive(1000, 20_000)
    text = "".join(line.format(i=i) for i in range(30_000))
    for start in range(0, len(text), chunk):
        sb.append(text[start : start + chunk])
        model.append(text[start : start + chunk])
        assert sb.retained_bytes == utf8_len(model.retained_text())
    assert_same(sb, model)
    assert sb.lines_since(29_000)[0] == model.read(29_000, 1000, 10**9)[0].split("\n")


# -- cost ----------------------------------------------------------------------------------


def _best_time(text: str, chunk: int) -> float:
    # CPU time of this process, best of several: a loaded machine stretches wall time
    # by whatever else runs, which says nothing about how the work grows.
    best = float("inf")
    for _ in range(5):
        sb = Scrollback()
        start = time.process_time()
        for i in range(0, len(text), chunk):
            sb.append(text[i : i + chunk])
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("unit", ["x" * 64, "é" * 32, "0123456789\n", "wide line " * 40 + "\n"])
def test_cost_is_linear(unit: str) -> None:
    small = unit * (5_000_000 // len(unit))
    large = unit * (20_000_000 // len(unit))
    ratio = _best_time(large, 1024) / _best_time(small, 1024)
    assert ratio < 10, ratio  # linear is about 4; quadratic would be about 16


def test_ten_megabyte_line_is_bounded() -> None:
    sb = Scrollback()
    for _ in range(2560):
        sb.append("z" * 4096)
    assert sb.total_lines == 1 and sb.dropped
    assert sb.retained_bytes == 4 * 1024 * 1024
    sb.append("\n")
    assert sb.retained_bytes == 4 * 1024 * 1024
    assert sb.lines_since(0)[0] == ["z" * (4 * 1024 * 1024 - 1)]


def test_a_huge_line_followed_by_a_prompt_keeps_its_tail() -> None:
    sb = Scrollback(max_lines=100, max_bytes=1000)
    sb.append("x" * 5000 + "END\n")
    sb.append("dsh> ")
    page = sb.read(1, 10, 10_000)
    first, prompt = page.text.split("\n")
    assert prompt == "dsh> "
    assert first.endswith("xxxEND") and len(first.encode()) + 1 + len(prompt) <= 1000
    assert sb.dropped
