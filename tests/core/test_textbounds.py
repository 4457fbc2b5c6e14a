"""UTF-8 byte bounds: never over budget, never a split code point, longest fit."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_terminal_core.kernel.textbounds import utf8_head, utf8_len, utf8_tail

SAMPLES = ["", "a", "abc", "é", "aé", "€uro", "𝄞x", "x𝄞", "日本語テキスト", "mixé€𝄞end"]


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize("text", SAMPLES)
def test_utf8_len_counts_encoded_bytes(text: str) -> None:
    assert utf8_len(text) == len(text.encode())


@pytest.mark.parametrize("text", SAMPLES)
def test_head_and_tail_at_every_budget(text: str) -> None:
    size = _size(text)
    for budget in range(size + 2):
        head, head_cut = utf8_head(text, budget)
        tail, tail_cut = utf8_tail(text, budget)
        assert text.startswith(head) and text.endswith(tail)
        assert _size(head) <= budget and _size(tail) <= budget
        assert head_cut == (head != text) and tail_cut == (tail != text)
        # Longest fit: one more code point would overflow.
        if head != text:
            assert _size(text[: len(head) + 1]) > budget
        if tail != text:
            assert _size(text[len(text) - len(tail) - 1 :]) > budget


def test_multibyte_cut_backs_off_to_boundary() -> None:
    assert utf8_head("a€", 3) == ("a", True)
    assert utf8_tail("€a", 3) == ("a", True)
    assert utf8_tail("𝄞", 3) == ("", True)
    assert utf8_head("𝄞", 4) == ("𝄞", False)


def test_negative_budget_counts_as_zero() -> None:
    assert utf8_head("abc", -5) == ("", True)
    assert utf8_tail("abc", -5) == ("", True)
    assert utf8_tail("", -1) == ("", False)


def test_lone_surrogates_do_not_raise() -> None:
    text = "a\ud800b"
    assert utf8_len(text) == 5
    assert utf8_tail(text, 4) == ("\ud800b", True)
    assert utf8_head(text, 2) == ("a", True)


def test_small_cut_of_huge_text_keeps_ends() -> None:
    text = "é" * 5_000_000 + "end"
    tail, cut = utf8_tail(text, 7)
    assert cut and tail == "éé" + "end"
    head, cut = utf8_head(text, 5)
    assert cut and head == "éé"


@given(st.text(), st.integers(min_value=0, max_value=64))
def test_bounds_property(text: str, budget: int) -> None:
    head, head_cut = utf8_head(text, budget)
    tail, tail_cut = utf8_tail(text, budget)
    assert text.startswith(head) and text.endswith(tail)
    assert _size(head) <= budget and _size(tail) <= budget
    assert _size(head) > budget - 4 or not head_cut
    assert _size(tail) > budget - 4 or not tail_cut
    assert head_cut == (head != text) and tail_cut == (tail != text)
    head.encode()  # valid UTF-8: st.text() has no lone surrogates
    tail.encode()
