"""A confined shell's exit status: a death by signal n and ``exit 128+n`` told apart."""

from __future__ import annotations

import pytest

from dsh_terminal_bash.echo import echoed_by, without_echo
from dsh_terminal_bash.exitstatus import unfolded

MARK = b"\x1b]133;E;"


@pytest.mark.parametrize(
    ("code", "tail", "expected"),
    [
        (137, b"dsh> ", (None, "SIGKILL")),  # killed: no trap ran
        (137, b"exit\r\n" + MARK + b"137\x07", (137, None)),  # exit 137: the trap said so
        (137, MARK + b"0\x07dsh> ", (None, "SIGKILL")),  # a nested shell's marker, earlier
        (139, MARK + b"137\x07", (None, "SIGSEGV")),  # another status than the marker's
        (3, b"", (3, None)),
        (0, b"", (0, None)),
        (128, b"", (128, None)),
        (255, b"", (255, None)),  # no signal 127
    ],
)
def test_the_status_is_unfolded_by_the_shells_own_marker(
    code: int, tail: bytes, expected: tuple[int | None, str | None]
) -> None:
    assert unfolded(code, tail) == expected


@pytest.mark.parametrize(
    ("modes", "echoed"),
    [
        ((True, True), True),  # the kernel echoes
        ((False, False), True),  # readline echoes by itself
        ((False, True), False),  # stty -echo; cat / read -s: nobody echoes
        ((True, False), True),
        (None, False),  # unreadable: never drop output on a guess
    ],
)
def test_echo_is_judged_on_the_modes(modes: tuple[bool, bool] | None, echoed: bool) -> None:
    assert echoed_by(modes) is echoed


def test_only_an_identifiable_echo_is_dropped() -> None:
    assert without_echo("dsh> echo hi\nhi\n", "echo hi", True, 160) == "hi\n"
    assert without_echo("echo hi\nhi\n", "echo hi", True, 160) == "hi\n"
    assert without_echo("other\n", "echo hi", True, 160) == "other\n"
    assert without_echo("echo hi\n", "echo hi", False, 160) == "echo hi\n"  # not submitted
