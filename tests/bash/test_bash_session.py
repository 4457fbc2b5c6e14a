"""The bash backend against real bash with the production timing defaults.

Wait reasons are asserted with the default ``idle_silence_ms`` (3000) so a dead prompt
path cannot hide behind a short silence: every fast ``stdin_read`` here is the prompt or
the exact stdin-wait tier, never silence.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from dsh_terminal_bash import BashConfig
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.registry import SendRequest, SpawnRequest, WaitReason

from ..helpers import full_access, harness, open_shell, send

DEFAULTS = BashConfig()
FAST = DEFAULTS.idle_silence_ms / 1000 / 2  # any settle faster than this was not silence


async def test_echo_settles_on_the_prompt_with_exit_code() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        started = time.monotonic()
        result = await send(h, agent, sid, "echo hello-world")
        assert time.monotonic() - started < FAST
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.exit_code == 0
        assert result.viewport == "hello-world\n"
        assert result.session_status.kind == "running"
        failed = await send(h, agent, sid, "false")
        assert (failed.wait_reason, failed.exit_code) == (WaitReason.STDIN_READ, 1)


async def test_cwd_and_exported_variables_persist(tmp_path: os.PathLike[str]) -> None:
    async with harness(full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await send(h, agent, sid, "mkdir -p sub && cd sub && export KEEP_ME='a b'")
        result = await send(h, agent, sid, 'pwd; echo "[$KEEP_ME]"')
        assert result.viewport == f"{os.path.realpath(tmp_path)}/sub\n[a b]\n"
        [snapshot] = h.ctx.terminals.list(agent)
        assert snapshot.cwd == f"{os.path.realpath(tmp_path)}/sub"


async def test_ps1_override_is_healed_before_the_next_prompt() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        override = await send(h, agent, sid, "PS1='x$ '")
        assert override.wait_reason is WaitReason.STDIN_READ
        started = time.monotonic()
        result = await send(h, agent, sid, "echo still-fast")
        assert time.monotonic() - started < FAST
        assert (result.wait_reason, result.viewport) == (WaitReason.STDIN_READ, "still-fast\n")


async def test_forged_marker_and_prompt_do_not_settle_early() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        started = time.monotonic()
        result = await send(
            h, agent, sid, r"printf '\033]133;D;0\007dsh> '; sleep 2; echo real-end"
        )
        elapsed = time.monotonic() - started
        assert elapsed >= 1.9, f"settled after {elapsed:.3f}s on a forged prompt"
        assert result.wait_reason is WaitReason.STDIN_READ
        assert "real-end" in result.viewport


async def test_python_repl_settles_on_exact_stdin_wait() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        opened = await send(h, agent, sid, "python3 -q -i")
        assert opened.wait_reason is WaitReason.STDIN_READ
        started = time.monotonic()
        result = await send(h, agent, sid, "1+1")
        assert time.monotonic() - started < FAST
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.exit_code is None  # no shell prompt: nothing to report
        assert not result.input_hidden
        assert result.viewport.startswith("2\n")
        await send(h, agent, sid, "exit()")


async def test_python_repl_lines_settle_with_their_whole_answer_and_no_look_before_writing() -> (
    None
):
    """Each REPL line settles on the REPL's own read, with all of its output, and the
    snapshot before each write comes from the look that settled the line before (the
    REPL has not run since), so no group look is taken while a send starts."""
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await send(h, agent, sid, "python3 -q -i")
        process = h.ctx.terminals.get_session(agent, sid)._process  # type: ignore[attr-defined]
        starting = False
        looks_while_starting = 0
        inspect = process.inspect_foreground

        def counted() -> object:
            nonlocal looks_while_starting
            looks_while_starting += starting
            return inspect()

        process.inspect_foreground = counted
        await send(h, agent, sid, "0")  # the first line after the shell's prompt
        for i in range(50):
            started = time.monotonic()
            starting = True
            op = h.ctx.terminals.start_send(
                agent, sid, SendRequest(text=f"print('line-{i}' * 3); {i} * 2")
            )
            starting = False
            result = await op.done
            assert time.monotonic() - started < FAST, i
            assert (result.wait_reason, result.exit_code) == (WaitReason.STDIN_READ, None), i
            assert result.viewport == f"{'line-' + str(i)}" * 3 + f"\n{i * 2}\n>>> ", (
                i,
                result.viewport,
            )
            assert looks_while_starting == 0, i
        await send(h, agent, sid, "exit()")


async def test_read_builtin_waits_and_next_send_supplies_the_value() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        started = time.monotonic()
        waiting = await send(h, agent, sid, "read answer")
        assert time.monotonic() - started < FAST
        assert waiting.wait_reason is WaitReason.STDIN_READ
        await send(h, agent, sid, "forty two")
        result = await send(h, agent, sid, 'echo "got:$answer"')
        assert result.viewport == "got:forty two\n"


async def test_password_prompt_is_reported_as_hidden_input() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        started = time.monotonic()
        prompt = await send(
            h,
            agent,
            sid,
            "python3 -c \"import getpass; print('secret is', len(getpass.getpass('Password: ')))\"",
        )
        assert time.monotonic() - started < 1.0
        assert prompt.wait_reason is WaitReason.STDIN_READ
        assert prompt.input_hidden is True
        assert "Password:" in prompt.viewport
        answered = await send(h, agent, sid, "hunter2")
        assert answered.wait_reason is WaitReason.STDIN_READ
        assert "secret is 7" in answered.viewport
        assert "hunter2" not in answered.viewport
        assert answered.exit_code == 0


async def test_timeout_leaves_the_session_running() -> None:
    async with harness(full_access(**{"terminal-bash": {"timeout_ms": 1000}})) as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        result = await send(h, agent, sid, "sleep 5")
        assert result.wait_reason is WaitReason.TIMEOUT
        assert result.session_status.kind == "running"
        assert result.exit_code is None


async def test_cancel_interrupts_and_settles_on_the_next_prompt() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30"))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await op.cancel()
        result = await op.done
        assert time.monotonic() - started < FAST
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.exit_code == 130
        after = await send(h, agent, sid, "echo alive")
        assert after.viewport == "alive\n"


async def test_cancellation_token_on_the_request_interrupts() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        cancel = Cancellation()
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30", cancel=cancel))
        await asyncio.sleep(0.3)
        cancel.cancel()
        result = await op.done
        assert (result.wait_reason, result.exit_code) == (WaitReason.STDIN_READ, 130)


async def test_second_concurrent_send_is_refused() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 0.5"))
        with pytest.raises(TerminalError) as info:
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo no"))
        assert info.value.code == "SEND_ACTIVE"
        await op.done


async def test_raw_mode_program_is_interrupted_by_sigint() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        raw = (
            'python3 -c "import sys, tty; tty.setraw(0); '
            "print('raw ready', flush=True); sys.stdin.read(1)\""
        )
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=raw))
        waiting = await op.done
        assert waiting.wait_reason is WaitReason.STDIN_READ
        assert not waiting.input_hidden
        signalled = await h.ctx.terminals.signal(agent, sid, "SIGINT")
        assert signalled.delivered
        # The interrupted program exits; the shell prompt comes back for the next send.
        result = await send(h, agent, sid, "echo back")
        assert "back" in result.viewport
        assert result.wait_reason is WaitReason.STDIN_READ


async def test_close_during_an_active_send_settles_session_exit() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30"))
        await asyncio.sleep(0.2)
        assert await h.ctx.terminals.kill(agent, sid, "test") is True
        result = await op.done
        assert result.wait_reason is WaitReason.SESSION_EXIT
        assert result.session_status.kind == "exited"


async def test_shell_exit_reports_its_code() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        result = await send(h, agent, sid, "exit 3")
        assert result.wait_reason is WaitReason.SESSION_EXIT
        assert (result.session_status.kind, result.session_status.exit_code) == ("exited", 3)
        [snapshot] = h.ctx.terminals.list(agent)
        assert snapshot.status.exit_code == 3
        again = await send(h, agent, sid, "echo nobody")
        assert again.wait_reason is WaitReason.SESSION_EXIT


async def test_missing_shell_fails_cleanly() -> None:
    async with harness(full_access(**{"terminal-bash": {"shell_path": "/nonexistent/bash"}})) as h:
        agent = h.create_agent("a")
        with pytest.raises(TerminalError) as info:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        assert info.value.code == "SPAWN_FAILED"
        assert "/nonexistent/bash" in str(info.value)
        assert h.ctx.terminals.list(agent) == []


async def test_shell_that_exits_during_startup_fails_the_spawn() -> None:
    config = full_access(
        **{"terminal-bash": {"shell_args": ["--noprofile", "--norc", "-c", "echo bye; exit 4"]}}
    )
    async with harness(config) as h:
        agent = h.create_agent("a")
        with pytest.raises(TerminalError) as info:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        assert info.value.code == "SPAWN_FAILED"
        assert "exit code 4" in str(info.value) and "bye" in str(info.value)


async def test_cancellation_during_startup_reraises_the_callers_reason() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        cancel = Cancellation()
        reason = RuntimeError("caller gave up")
        task = asyncio.ensure_future(
            h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"), cancel)
        )
        await asyncio.sleep(0.002)
        cancel.cancel(reason)
        with pytest.raises(RuntimeError) as info:
            await task
        assert info.value is reason
        assert h.ctx.terminals.list(agent) == []


async def test_long_one_line_command_and_heredoc_run_intact() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        payload = "".join(chr(ord("a") + i % 26) for i in range(10_000))
        result = await send(h, agent, sid, f"echo {payload} | wc -c")
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.viewport.strip().endswith("10001")
        lines = [f"line {i} with some text" for i in range(400)]
        heredoc = "cat <<'EOF' | md5sum\n" + "\n".join(lines) + "\nEOF"
        result = await send(h, agent, sid, heredoc)
        import hashlib

        expected = hashlib.md5(("\n".join(lines) + "\n").encode()).hexdigest()
        assert expected in result.viewport
        assert result.exit_code == 0


async def test_scrollback_read_pages_by_absolute_line() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await send(h, agent, sid, "seq 1 300")
        from dsh_terminal_core.registry import ReadRequest

        page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=1, count=1000))
        lines = page.text.split("\n")
        first = lines.index("1")
        # Lines are numbered from 1: "1" is line first + 1, so "100" is first + 100.
        window = h.ctx.terminals.read(agent, sid, ReadRequest(offset=first + 100, count=3))
        assert window.text == "100\n101\n102"
        assert (window.line_begin, window.line_end) == (first + 100, first + 102)
        for offset in (-1, 0):
            with pytest.raises(TerminalError) as info:
                h.ctx.terminals.read(agent, sid, ReadRequest(offset=offset, count=3))
            assert info.value.code == "INVALID_ARGUMENT"


async def test_motd_and_session_identity_in_the_environment() -> None:
    async with harness() as h:
        agent = h.create_agent("agent-env")
        sid = await open_shell(h, agent)
        result = await send(
            h, agent, sid, 'echo "$DSH_SHELL $DSH_SESSION_ID $DSH_PTY_SESSION_ID $TERM $PAGER"'
        )
        assert result.viewport == f"1 agent-env {sid} dumb cat\n"


async def test_overridden_prompt_command_still_settles_on_the_shells_read() -> None:
    # Without the marker the prompt tier is gone; the exact stdin-wait tier still sees
    # bash blocked reading its terminal, long before the silence tier would. Each of
    # PS1 and PROMPT_COMMAND restores the other, so only replacing both loses the marker.
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        await send(h, agent, sid, "PROMPT_COMMAND=: PS1='$ '")
        started = time.monotonic()
        result = await send(h, agent, sid, "echo no-marker")
        assert time.monotonic() - started < FAST
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.exit_code is None  # no marker, so no $? to report
        assert "no-marker" in result.viewport
