"""The randomized readiness stress with its oracle, at a size that fits the suite.

The full-size run (at least 5,000 settlements) is a command of its own, with its figure
in the README: ``python3 tests/reliability/oracle.py --ops 5000 --seed 1``.
"""

from __future__ import annotations

import random

from dsh_terminal_core.registry import SendResult, SessionStatus, WaitReason

from .oracle import OracleReport, _Stream, run_oracle, without_cut_echo


async def test_randomized_flows_never_settle_wrongly() -> None:
    report = await run_oracle(operations=240, seed=20261130, streams=4)
    print("FIGURE oracle", report.as_dict())
    assert report.operations >= 240
    assert report.wrong == 0, report.failures
    assert report.unexpected == 0, report.failures
    # Every kind of flow ran.
    assert set(report.kinds) >= {"plain", "timeout", "cancel", "wait", "background"}


def test_a_cancel_owns_the_echo_of_its_line_cut_short() -> None:
    # Bash echoed the part of the line it read before the cancel flushed the rest; the
    # interrupt that dropped that part printed ^C behind it, inside the line's token.
    typed = "sleep 0.2; echo fg-0-773; (exit 8)"
    assert without_cut_echo("sleep 0.2; echo fg-0-7^C\n", typed) == "^C\n"
    assert without_cut_echo("echo x\ndsh> sleep 0.2; echo fg-0-77^C\n", typed) == "echo x\n^C\n"
    # Another line's token is still seen, cut short or not, and so is a whole echo.
    assert without_cut_echo("sleep 5; echo fg-0-41^C\n", typed) == "sleep 5; echo fg-0-41^C\n"
    assert without_cut_echo("sleep 0.2; echo fg-0-7\n", typed) == "sleep 0.2; echo fg-0-7\n"


def test_the_oracle_counts_a_cut_echo_right_and_a_foreign_token_wrong() -> None:
    report = OracleReport(seed=0)
    stream = _Stream(
        index=0,
        rng=random.Random(0),
        harness=None,  # type: ignore[arg-type]  # judging needs no shell
        agent=None,  # type: ignore[arg-type]
        session_id="s",
        report=report,
    )
    typed = "sleep 0.2; echo fg-0-773; (exit 8)"

    def cancelled(viewport: str) -> SendResult:
        return SendResult(
            viewport=viewport,
            wait_reason=WaitReason.STDIN_READ,
            session_status=SessionStatus.running(),
            truncated=False,
            exit_code=130,
        )

    codes = frozenset({130, 8})
    stream.judge(
        "cancel", cancelled("sleep 0.2; echo fg-0-7^C\n"), codes=codes, own="fg-0-773", typed=typed
    )
    assert (report.wrong, report.failures) == (0, [])
    stream.judge(
        "cancel", cancelled("fg-0-41\nsleep 0.2; echo fg-0-7^C\n"), codes=codes, own="fg-0-773"
    )
    assert report.wrong == 1, report.failures


def test_zsh_leaves_the_echo_of_a_cut_line_without_a_caret_c() -> None:
    # zsh's line editor redraws the part it read and prints no ^C: with ``bare`` that
    # whole line is the echo, and output of another line is still seen.
    typed = "sleep 0; echo fg-3-130; (exit 8)"
    assert without_cut_echo("sleep 0; echo fg-3-13\n", typed, bare=True) == "\n"
    assert without_cut_echo("fg-3-13\n", typed, bare=True) == "fg-3-13\n"
    assert without_cut_echo("sleep 0; echo fg-3-13\n", typed) == "sleep 0; echo fg-3-13\n"
