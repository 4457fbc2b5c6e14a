"""Unit tests of the env export line: validation, and a shell reads every value back exactly."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_pty_session import export_line, quote
from dsh_terminal_core.kernel.errors import InvalidArgument


def test_printable_values_use_posix_single_quotes() -> None:
    assert quote("plain") == "'plain'"
    assert quote("it's") == "'it'\\''s'"
    assert quote('$HOME `x` \\ "q"') == "'$HOME `x` \\ \"q\"'"
    assert quote("two\nlines") == "'two\nlines'"
    assert quote("") == "''"


def test_control_characters_use_ansi_c_escapes_and_never_appear_raw() -> None:
    quoted = quote("a\tb\x1b[0m\x7f'\\\n\x9b")
    assert quoted == "$'a\\tb\\033[0m\\177\\'\\\\\\n\\302\\233'"
    assert all(ch == "\n" or ch.isprintable() for ch in quoted)


def test_export_line_exports_every_variable_in_one_command() -> None:
    assert export_line({"A": "1", "_b2": "x y"}) == "export A='1' _b2='x y'"


@pytest.mark.parametrize("name", ["1A", "A-B", "", "A B", "é", "A=B", "$A", "A\n"])
def test_names_that_are_not_shell_identifiers_are_rejected(name: str) -> None:
    with pytest.raises(InvalidArgument, match="not a valid shell identifier"):
        export_line({"OK": "1", name: "x"})


@pytest.mark.parametrize(
    ("value", "needle"),
    [("a\x00b", "NUL"), (1, "must be a string"), ("\udc80", "not valid Unicode")],
)
def test_values_no_environment_can_hold_are_rejected(value: object, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        export_line({"A": value})  # type: ignore[dict-item]


def bash_reads_back(value: str) -> bytes:
    script = export_line({"V": value}) + "\nprintf '%s' \"$V\""
    done = subprocess.run(
        ["/bin/bash", "--noprofile", "--norc", "-c", script],
        capture_output=True,
        timeout=10,
        check=True,
    )
    return done.stdout


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")))
def test_bash_reads_any_value_back_byte_for_byte(value: str) -> None:
    assert bash_reads_back(value) == value.encode("utf-8")
