"""The dsh-terminal command line: ``plugins`` lists what entry points discovered."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_terminal_core.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_plugins_lists_every_distribution_with_provides_injects_and_tools() -> None:
    result = run_cli("plugins")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in (
        "subprocess-local", "terminals", "sandbox-policy", "sandbox-bwrap", "jobs",
        "terminal-bash", "tool-terminal", "pty-session",
    ):
        assert f"\n{name}  —  " in "\n" + out, name
    blocks = {block.split("  —  ")[0]: block for block in out.split("\n\n") if "  —  " in block}
    assert "provides: pty" in blocks["pty-session"]
    assert "injects:  terminals" in blocks["pty-session"]
    assert "(dsh-pty-session)" in blocks["pty-session"]
    assert "injects:  subprocess, terminals, sandbox_policy, sandbox (optional)" in blocks["terminal-bash"]
    assert "idle_silence_ms=3000" in blocks["terminal-bash"]
    assert (
        "tools:    terminal_open, terminal_send, terminal_read, terminal_signal, terminal_close, terminal_list"
        in blocks["tool-terminal"]
    )
    assert "tools:    job_output, job_kill" in blocks["jobs"]
    assert "tools:    pty_open, pty_send, pty_tail, pty_close" in blocks["pty-session"]


def test_unknown_command_is_a_usage_error() -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr
