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
        "subprocess-local",
        "terminals",
        "sandbox-policy",
        "sandbox-bwrap",
        "jobs",
        "terminal-bash",
        "tool-terminal",
        "pty-session",
    ):
        assert f"\n{name}  —  " in "\n" + out, name
    blocks = {block.split("  —  ")[0]: block for block in out.split("\n\n") if "  —  " in block}
    assert "provides: pty" in blocks["pty-session"]
    assert "injects:  terminals" in blocks["pty-session"]
    assert "(dsh-pty-session)" in blocks["pty-session"]
    assert (
        "injects:  subprocess, terminals, sandbox_policy, sandbox (optional)"
        in blocks["terminal-bash"]
    )
    assert "idle_silence_ms=3000" in blocks["terminal-bash"]
    assert (
        "tools:    terminal_open, terminal_send, terminal_read, terminal_signal, "
        "terminal_close, terminal_list" in blocks["tool-terminal"]
    )
    assert "tools:    job_output, job_kill" in blocks["jobs"]
    assert "tools:    pty_open, pty_send, pty_tail, pty_close" in blocks["pty-session"]


def test_unknown_command_is_a_usage_error() -> None:
    result = run_cli("frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_mcp_tools_names_the_profiles_and_refuses_others() -> None:
    helped = run_cli("mcp", "--help")
    assert "--tools {dsh,codex,claude}" in helped.stdout
    refused = run_cli("mcp", "--tools", "gemini")
    assert refused.returncode == 2
    assert "invalid choice: 'gemini'" in refused.stderr


def test_plugins_shows_the_backend_types_each_plugin_registers() -> None:
    result = run_cli("plugins")
    assert result.returncode == 0, result.stderr
    blocks = {b.split("  —  ")[0]: b for b in result.stdout.split("\n\n") if "  —  " in b}
    assert "registers backend: shell" in blocks["terminal-bash"]
    assert "registers backend" not in blocks["pty-session"]
    assert "outside a plugin" not in result.stdout


def test_version_names_every_installed_distribution() -> None:
    import importlib.metadata

    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    core = importlib.metadata.version("dsh-terminal-core")
    lines = result.stdout.splitlines()
    assert lines[0] == f"dsh-terminal {core}"
    for distribution in (
        "dsh-terminal-core",
        "dsh-terminal-bash",
        "dsh-tool-terminal",
        "dsh-pty-session",
    ):
        version = importlib.metadata.version(distribution)
        assert f"  {distribution} {version}" in lines


def test_bare_invocation_shows_help_and_succeeds() -> None:
    result = run_cli()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: dsh-terminal")
    for command in ("plugins", "demo", "mcp"):
        assert f"    {command} " in result.stdout
    assert result.stderr == ""


def test_mcp_without_the_extra_names_it_once() -> None:
    # A child interpreter that cannot import the SDK, as after a plain install.
    code = (
        "import sys; sys.modules['mcp'] = None; "
        "from dsh_terminal_core.cli import main; raise SystemExit(main(['mcp']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("dsh-terminal mcp: ")
    assert lines[0].count("dsh-terminal") == 2  # the prefix and the distribution name
    assert lines[0].endswith("pip install 'dsh-terminal-core[mcp]'")
