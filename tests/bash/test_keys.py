"""Named keys and the modes that change what they send."""

from __future__ import annotations

import pytest

from dsh_terminal_bash.keys import encode_keys
from dsh_terminal_bash.modes import ModeTracker, TerminalModes
from dsh_terminal_core.kernel.errors import TerminalError

NORMAL = TerminalModes()
APPLICATION = TerminalModes(application_cursor=True)


@pytest.mark.parametrize(
    ("key", "normal", "application"),
    [
        ("Up", "\x1b[A", "\x1bOA"),
        ("Down", "\x1b[B", "\x1bOB"),
        ("Right", "\x1b[C", "\x1bOC"),
        ("Left", "\x1b[D", "\x1bOD"),
        ("Home", "\x1b[H", "\x1bOH"),
        ("End", "\x1b[F", "\x1bOF"),
        ("PageDown", "\x1b[6~", "\x1b[6~"),
        ("Enter", "\r", "\r"),
        ("Escape", "\x1b", "\x1b"),
        ("Backspace", "\x7f", "\x7f"),
        ("F1", "\x1bOP", "\x1bOP"),
        ("F12", "\x1b[24~", "\x1b[24~"),
        ("C-c", "\x03", "\x03"),
        ("C-z", "\x1a", "\x1a"),
        ("M-x", "\x1bx", "\x1bx"),
        ("Space", " ", " "),
    ],
)
def test_named_keys_encode_for_the_current_mode(key: str, normal: str, application: str) -> None:
    assert encode_keys([key], NORMAL) == normal
    assert encode_keys([key], APPLICATION) == application


def test_literal_items_are_typed_as_they_are_between_keys() -> None:
    assert encode_keys(["i", "hello screen", "Escape", ":wq", "Enter"], NORMAL) == (
        "ihello screen\x1b:wq\r"
    )


def test_a_single_capital_letter_is_typed_not_refused() -> None:
    assert encode_keys(["G", "O", "A", "F"], NORMAL) == "GOAF"


@pytest.mark.parametrize("bad", ["NoSuchKey", "F13", "PageDwn", "C-1", "S-Tab", "M-xy", "C-A"])
def test_a_misspelled_key_is_refused_and_nothing_is_encoded(bad: str) -> None:
    with pytest.raises(TerminalError) as caught:
        encode_keys(["i", "text", bad], NORMAL)
    assert caught.value.code == "INVALID_ARGUMENT"
    assert bad in str(caught.value)


@pytest.mark.parametrize("bad", [[], [""], [3]])
def test_empty_or_non_string_keys_are_refused(bad: list[object]) -> None:
    with pytest.raises(TerminalError) as caught:
        encode_keys(bad, NORMAL)  # type: ignore[arg-type]
    assert caught.value.code == "INVALID_ARGUMENT"


def test_mode_switches_are_followed_across_chunk_boundaries() -> None:
    tracker = ModeTracker()
    stream = b"text\x1b[?1h\x1b=more\x1b[?25;1049hdraw\x1b[?1049l\x1b[?1l\x1b>"
    for cut in range(len(stream) + 1):
        tracker = ModeTracker()
        tracker.feed(stream[:cut])
        tracker.feed(stream[cut:])
        assert tracker.modes == TerminalModes()
        assert tracker.entered_alternate
    tracker = ModeTracker()
    tracker.feed(b"\x1b[?1")
    tracker.feed(b"h\x1b[?104")
    tracker.feed(b"9h\x1b")
    tracker.feed(b"=")
    assert tracker.modes == TerminalModes(
        application_cursor=True, application_keypad=True, alternate_screen=True
    )
    tracker.feed(b"\x1bc")
    assert tracker.modes == TerminalModes()
