"""Viewport buffers: tail kept within the byte bound, consuming reads never repeat."""

from __future__ import annotations

import time

import pytest
from dsh_terminal_bash.viewport import TailBuffer, ViewportBuffer
from dsh_terminal_core.textbounds import utf8_len, utf8_tail
from hypothesis import given, settings
from hypothesis import strategies as st

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
    best = float("inf")
    for _ in range(3):
        vb = ViewportBuffer(256 * 1024)
        start = time.perf_counter()
        for _ in range(total // 4096):
            vb.append("q" * 4095 + "\n")
        vb.text()
        best = min(best, time.perf_counter() - start)
    return best


def test_cost_is_linear() -> None:
    ratio = _best_time(40_000_000) / _best_time(10_000_000)
    assert ratio < 10, ratio
