"""What the model types stays out of the user's history files.

Each test gives the shells a fresh ``HOME``, drives bash and a Python REPL through the
session as the model would, ends the shell both ways bash saves history (``exit``, and the
hangup a close delivers), and then proves with a control run — the same steps with the
history switches removed — that this ``HOME`` would have received both files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import WaitReason

from ..helpers import full_access, harness, open_shell, send

HISTORY_FILES = (".bash_history", ".python_history")


async def _drive_bash_and_python(h: Harness, agent: Agent, sid: str) -> None:
    for text in ("echo typed-by-the-model", f"{sys.executable} -q -i", "model_value = 6 * 7"):
        result = await send(h, agent, sid, text)
        assert result.wait_reason is WaitReason.STDIN_READ, (text, result)
    result = await send(h, agent, sid, "exit()")
    assert result.wait_reason is WaitReason.STDIN_READ  # back at a bash prompt


async def test_bash_and_python_history_never_reach_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    async with harness(full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")

        closed = await open_shell(h, agent)
        await _drive_bash_and_python(h, agent, closed)
        shown = await send(h, agent, closed, 'echo "[$HISTFILE]"; history')
        assert "[]\n" in shown.viewport  # empty: bash saves no history file
        assert "echo typed-by-the-model" in shown.viewport  # in-memory history still works
        assert await h.ctx.terminals.kill(agent, closed, "test") is True  # hangup path

        exited = await open_shell(h, agent)
        await _drive_bash_and_python(h, agent, exited)
        result = await send(h, agent, exited, "exit")  # exit path
        assert result.wait_reason is WaitReason.SESSION_EXIT
        assert sorted(p.name for p in home.iterdir()) == []

        # Control: the same steps in a nested shell without the switches write both files,
        # so the assertion above could have failed.
        control = await open_shell(h, agent)
        nested = "env -u HISTFILE -u PYTHONSTARTUP -u PYTHON_HISTORY bash --norc --noprofile -i"
        assert (await send(h, agent, control, nested)).wait_reason is WaitReason.STDIN_READ
        await _drive_bash_and_python(h, agent, control)
        assert (await send(h, agent, control, "exit")).wait_reason is WaitReason.STDIN_READ
        await h.ctx.terminals.kill(agent, control, "test")
    assert sorted(p.name for p in home.iterdir()) == sorted(HISTORY_FILES)
    assert "typed-by-the-model" in (home / ".bash_history").read_text()
    assert "model_value = 6 * 7" in (home / ".python_history").read_text()


async def test_a_users_own_python_startup_file_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    startup = tmp_path / "startup.py"
    startup.write_text("users_startup_ran = 'yes'\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PYTHONSTARTUP", str(startup))
    async with harness(full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await send(h, agent, sid, f"{sys.executable} -q -i")
        asked = "users_startup_ran, sorted(n for n in dir() if n[0] != '_')"
        result = await send(h, agent, sid, asked)
        assert "('yes', ['users_startup_ran'])" in result.viewport
        await send(h, agent, sid, "exit()")
        await h.ctx.terminals.kill(agent, sid, "test")
    assert list(home.iterdir()) == []


def test_a_startup_file_under_the_hosts_tmp_is_not_named_to_a_confined_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dsh_terminal_bash import environment

    monkeypatch.setattr(environment, "PYTHON_STARTUP", "/tmp/clone/pythonstartup.py")
    confined = environment.shell_environment("a", "pty-1", private_tmp=True)
    assert "PYTHONSTARTUP" not in confined and confined["PYTHON_HISTORY"] == "/dev/null"
    assert confined["HISTFILE"] == ""
    unconfined = environment.shell_environment("a", "pty-1")
    assert unconfined["PYTHONSTARTUP"] == "/tmp/clone/pythonstartup.py"
    monkeypatch.setattr(environment, "PYTHON_STARTUP", "/opt/site/pythonstartup.py")
    assert "PYTHONSTARTUP" in environment.shell_environment("a", "pty-1", private_tmp=True)


@pytest.mark.bwrap
async def test_a_confined_python_repl_starts_cleanly(tmp_path: Path) -> None:
    config = {"sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)}}
    async with harness(config) as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        started = await send(h, agent, sid, "python3 -q -i")
        assert started.wait_reason is WaitReason.STDIN_READ
        assert "PYTHONSTARTUP" not in started.viewport and "Error" not in started.viewport
        result = await send(h, agent, sid, "6 * 7")
        assert "42" in result.viewport
        await send(h, agent, sid, "exit()")
