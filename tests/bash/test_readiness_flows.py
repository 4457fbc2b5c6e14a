"""Cancel as a real Ctrl-C, exit codes that survive the noise, nested shells.

Each flow runs at least 50 times on one shell with the production timing defaults, for
each shell the flow holds for (``tests/shells.py``), and asserts, every time, the exact wait reason, the exit code and that the
output belongs to the command that was sent.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SendResult, WaitReason

from ..helpers import harness, open_shell, send
from ..shells import (  # noqa: F401  (every test runs for each shell)
    busy_loop,
    current,
    each_shell,
    exit_with,
    interrupted_codes,
    nested,
    rounds,
)

ROUNDS = 50
STDIN = WaitReason.STDIN_READ
# Long enough for bash to reach the held point of its line on a loaded machine.
CUT_LINE_BUDGET_MS = 600


def _last_line(viewport: str) -> str:
    lines = [line for line in viewport.split("\n") if line.strip()]
    return lines[-1] if lines else ""


async def _cancel_after_turns(
    h: Harness, agent: Agent, sid: str, text: str, turns: int
) -> SendResult:
    """Start sending ``text``, let ``turns`` loop turns pass, cancel, and return the result."""
    op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=text))
    for _ in range(turns):
        await asyncio.sleep(0)
    await op.cancel()
    result: SendResult = await op.done
    return result


async def _next_line_runs_alone(
    h: Harness, agent: Agent, sid: str, token: str, code: int = 0
) -> None:
    """The next line settles on its own prompt, with its own exit code and only its output."""
    line = f"echo {token}" + (f"; {exit_with(code)}" if code else "")
    after = await send(h, agent, sid, line)
    assert (after.wait_reason, after.exit_code) == (STDIN, code), (token, after)
    assert after.viewport == f"{token}\n", (token, after.viewport)


@pytest.mark.shells("shell", "zsh", "fish")
async def test_cancel_within_loop_turns_of_the_send_never_runs_part_of_the_line() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS) * 2):
            # Cancel 0, 1, 2 or 3 loop turns after the send.
            result = await _cancel_after_turns(h, agent, sid, "sleep 20", i % 4)
            assert (result.wait_reason, result.exit_code) == (STDIN, 130), (i, result)
            assert "command not found" not in result.viewport, (i, result.viewport)
            # Nothing of the cancelled line is left running or queued: the next send is
            # answered by its own prompt, with its own output.
            await _next_line_runs_alone(h, agent, sid, f"next-{i}")


@pytest.mark.shells("shell", "zsh", "fish")
async def test_cancel_interrupts_a_command_that_takes_the_foreground_late() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            # A builtin runs first, so the cancel can land while bash itself is busy with
            # the line; the sleep forked afterwards must still be interrupted.
            result = await _cancel_after_turns(
                h, agent, sid, f"true {i}; sleep 20; echo not-{i}", i % 3 + 1
            )
            assert (result.wait_reason, result.exit_code) == (STDIN, 130), (i, result)
            assert f"not-{i}" not in result.viewport.split("\n"), (i, result.viewport)


async def _hold_line_editor(h: Harness, agent: Agent, sid: str, held: Path, gate: Path) -> None:
    """Bind Ctrl-T to a command that reports through ``held`` and blocks on ``gate``.

    Typed inside a line, Ctrl-T keeps the shell busy between two reads of that line,
    with the part before it read into its line editor and the rest still unread on the
    terminal: bash through ``bind -x``, zsh through a widget of its line editor.
    """
    os.mkfifo(held)
    os.mkfifo(gate)
    hold = f"echo held > {held}; read -r _ < {gate}"
    binding = (
        f"bind -x '\"\\C-t\": {hold}'"
        if current() == "shell"
        else f"__hold() {{ {hold} }}; zle -N __hold; bindkey '^T' __hold"
    )
    bound = await send(h, agent, sid, binding)
    assert (bound.wait_reason, bound.exit_code) == (STDIN, 0), bound


@pytest.mark.shells("shell", "zsh")  # fish: a key binding runs between its reads otherwise
async def test_cancel_while_bash_is_busy_inside_its_line_drops_the_part_it_read(
    tmp_path: Path,
) -> None:
    held, gate = tmp_path / "held", tmp_path / "gate"
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await _hold_line_editor(h, agent, sid, held, gate)
        for i in range(rounds(ROUNDS)):
            line = f"echo part-{i}\x14; echo rest-{i}; {exit_with(3)}"
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=line))
            # Bash has read `echo part-N` and is busy; the rest of the line is unread.
            assert await asyncio.to_thread(held.read_text) == "held\n"
            await op.cancel()
            # Back at its read with `echo part-N` in its line editor: only now may the
            # cancel interrupt it, and the send settles on the prompt that answers that.
            await asyncio.to_thread(gate.write_text, "go\n")
            result = await op.done
            assert (result.wait_reason, result.exit_code) == (STDIN, 130), (i, result)
            lines = result.viewport.split("\n")
            assert f"part-{i}" not in lines and f"rest-{i}" not in lines, (i, result.viewport)
            if current() == "shell":  # readline echoes the dropped part and ^C
                assert lines[-2:] == [f"dsh> echo part-{i}^C", ""], (i, result.viewport)
            # Nothing of the line is left in the editor to run joined to the next one.
            await _next_line_runs_alone(h, agent, sid, f"next-{i}")


@pytest.mark.shells("shell", "zsh")
async def test_cancel_outlived_by_a_busy_shell_still_drops_the_part_it_read(
    tmp_path: Path,
) -> None:
    held, gate = tmp_path / "held", tmp_path / "gate"
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await _hold_line_editor(h, agent, sid, held, gate)
        for i in range(rounds(ROUNDS)):
            # The send's budget runs out while bash is still busy inside the line it was
            # reading when the cancel flushed the rest of it (the budget is what this
            # flow is about; the silence tier ends such a send the same way, later).
            line = f"echo part-{i}\x14; echo rest-{i}; {exit_with(3)}"
            op = h.ctx.terminals.start_send(
                agent, sid, SendRequest(text=line, timeout_ms=CUT_LINE_BUDGET_MS)
            )
            assert await asyncio.to_thread(held.read_text) == "held\n"
            assert not op.done.done(), (i, "the budget ran out before the cancel")
            await op.cancel()
            result = await op.done
            assert (result.wait_reason, result.exit_code) == (WaitReason.TIMEOUT, None), (i, result)
            assert f"part-{i}" not in result.viewport.split("\n"), (i, result.viewport)
            await asyncio.to_thread(gate.write_text, "go\n")
            # The next line is typed only once the part read before the cancel was
            # dropped: it runs alone, with its own exit code and output.
            await _next_line_runs_alone(h, agent, sid, f"next-{i}", code=5)


@pytest.mark.shells("shell", "zsh", "fish")
async def test_cancel_stops_a_loop_the_shell_runs_by_itself(tmp_path: Path) -> None:
    running = tmp_path / "running"
    os.mkfifo(running)
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            # Builtins only: no command ever takes the foreground from the shell.
            line = f"echo up > {running}; {busy_loop()}; echo never-{i}; {exit_with(3)}"
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=line))
            assert await asyncio.to_thread(running.read_text) == "up\n"
            await op.cancel()
            result = await op.done
            assert result.wait_reason is STDIN, (i, result)
            assert result.exit_code in interrupted_codes(), (i, result)
            assert f"never-{i}" not in result.viewport.split("\n"), (i, result.viewport)
            await _next_line_runs_alone(h, agent, sid, f"after-{i}")


@pytest.mark.shells("shell", "zsh", "fish")
async def test_cancel_after_sigint_to_the_idle_shell_leaves_nothing_behind() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            before = await send(h, agent, sid, f"echo before-{i}; {exit_with(4)}")
            assert (before.wait_reason, before.exit_code) == (STDIN, 4), (i, before)
            # The idle shell is interrupted, so the next send answers that first; the
            # cancel lands 0-3 loop turns into it, before or while its line is typed.
            for _ in range(1 + i % 2):
                await h.ctx.terminals.signal(agent, sid, "SIGINT")
            result = await _cancel_after_turns(
                h, agent, sid, f"sleep 5; echo cancelled-{i}; {exit_with(3)}", i % 4
            )
            assert (result.wait_reason, result.exit_code) == (STDIN, 130), (i, result)
            assert f"cancelled-{i}" not in result.viewport.split("\n"), (i, result.viewport)
            assert "not found" not in result.viewport, (i, result.viewport)
            await _next_line_runs_alone(h, agent, sid, f"after-{i}")


@pytest.mark.shells("shell", "zsh", "fish")
async def test_exit_code_survives_a_bare_carriage_return() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            result = await send(h, agent, sid, f"printf 'cr-{i}\\r'; {exit_with(3)}")
            assert (result.wait_reason, result.exit_code) == (STDIN, 3), (i, result)
            assert _last_line(result.viewport) == f"cr-{i}", (i, result.viewport)


@pytest.mark.local_only
async def test_exit_code_survives_a_job_notice() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        # fish announces no job when it starts one: its pid is asked for.
        start = "sleep 0.01 &; echo [1] $last_pid" if current() == "fish" else "sleep 0.01 &"
        for i in range(rounds(ROUNDS)):
            started = await send(h, agent, sid, start)
            found = re.search(r"\[\d+\] (\d+)", started.viewport)
            assert found, started.viewport
            pid = int(found.group(1))
            # The job ends while bash idles at its prompt, so bash prints its notice
            # right before the next prompt (builtins only: a fork would print it earlier).
            while os.path.exists(f"/proc/{pid}") and _state(pid) != "Z":
                await asyncio.sleep(0.005)
            result = await send(h, agent, sid, f"echo job-{i}; false")
            assert (result.wait_reason, result.exit_code) == (STDIN, 1), (i, result)
            assert f"job-{i}" in result.viewport.split("\n"), (i, result.viewport)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


@pytest.mark.shells("shell")  # the others: test_shell_protocols.py
async def test_exit_code_survives_a_replaced_prompt_command_or_ps1() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        replacements = ("unset PROMPT_COMMAND", "PROMPT_COMMAND='true'", "PS1='x$ '", "unset PS1")
        for i in range(rounds(ROUNDS)):
            await send(h, agent, sid, replacements[i % len(replacements)])
            result = await send(h, agent, sid, f"echo pc-{i}; {exit_with(3)}")
            assert (result.wait_reason, result.exit_code) == (STDIN, 3), (i, result)
            assert result.viewport == f"pc-{i}\n", (i, result.viewport)
            # Replacing the second one too is the documented fallback; restore both.
            await send(h, agent, sid, 'PROMPT_COMMAND="$DSH_PROMPT_COMMAND" PS1="$DSH_PS1"')


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
@pytest.mark.shells("shell", "zsh", "fish")
async def test_exit_code_survives_quitting_vim() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            opened = await send(h, agent, sid, "vim -u NONE -N -n")
            assert opened.wait_reason is STDIN, (i, opened)
            code = i % 2  # :q leaves 0, :cq leaves 1
            quit_ = await send(h, agent, sid, ":cq" if code else ":q!")
            assert (quit_.wait_reason, quit_.exit_code) == (STDIN, code), (i, quit_)


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
@pytest.mark.shells("shell", "zsh", "fish")
async def test_exit_code_survives_quitting_less() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            opened = await send(h, agent, sid, "less -K /etc/passwd")
            assert opened.wait_reason is STDIN, (i, opened)
            quit_ = await send(h, agent, sid, "q", submit=False)
            assert (quit_.wait_reason, quit_.exit_code) == (STDIN, 0), (i, quit_)
            check = await send(h, agent, sid, f"echo less-{i}")
            assert check.viewport == f"less-{i}\n", (i, check.viewport)


@pytest.mark.shells("shell", "zsh", "fish")
async def test_nested_shell_settles_on_its_prompt_with_exit_codes() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i in range(rounds(ROUNDS)):
            # --norc keeps the user's rc files out; a plain `bash` is one of the rounds.
            entered = await send(h, agent, sid, nested(plain=i % 10 == 0))
            assert (entered.wait_reason, entered.exit_code) == (STDIN, 0), (i, entered)
            inside = await send(h, agent, sid, f"echo in-{i}; {exit_with(4)}")
            assert (inside.wait_reason, inside.exit_code) == (STDIN, 4), (i, inside)
            assert inside.viewport == f"in-{i}\n", (i, inside.viewport)
            left = await send(h, agent, sid, f"exit {i % 7 + 1}")
            assert (left.wait_reason, left.exit_code) == (STDIN, i % 7 + 1), (i, left)


@pytest.mark.shells("shell", "zsh", "fish")
async def test_forged_marker_inside_a_nested_shell_does_not_settle_early() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await send(h, agent, sid, nested())
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await send(
            h, agent, sid, r"printf '\033]133;D;0\007dsh> '; sleep 1; " + exit_with(6)
        )
        assert loop.time() - started >= 0.9, result
        assert (result.wait_reason, result.exit_code) == (STDIN, 6)
        left = await send(h, agent, sid, "exit")
        assert (left.wait_reason, left.exit_code) == (STDIN, 6)
