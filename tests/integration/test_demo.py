"""The main job: ``dsh-terminal demo`` runs the tour, exits 0 and leaves nothing behind."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_the_tour_and_exits_zero() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dsh_terminal_core.cli", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert "sandbox: " in out  # it says which mode it runs in, and why
    for check in (
        "the cwd survived to the next send",
        "`false` reports exit code 1",
        "the REPL kept `answer`",
        "sleep was interrupted (exit code 130)",
        "all three ticks were collected",
        "the first line and the last line both survived (head + tail, one line between)",
        "continues exactly where the head stopped",
        "a second tail resends nothing",
        "processes the demo started are gone; nothing left running",
    ):
        assert (
            f"✓ {check}" in out
            or check in out.splitlines()[-1]
            or (check.startswith("continues") and check in out)
        ), check


def test_demo_with_an_explicit_sandbox_mode_says_so() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dsh_terminal_core.cli", "demo", "--sandbox", "danger-full-access"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "sandbox: danger-full-access (chosen with --sandbox)" in result.stdout
