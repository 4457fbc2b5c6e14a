"""Each shell's own protocol (SPEC §32.2): the self-healing prompt, continuation, the
exit marker, hidden prompts with a secret, screen sessions; and fish's output filter.

The shared ladder is asserted by the readiness suites run for each shell
(``test_readiness_flows.py``, ``test_readiness_fences.py``); these are the parts a
:class:`~dsh_terminal_bash.ShellPolicy` decides.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys

import pytest

from dsh_terminal_core.registry import SendRequest, SpawnRequest, WaitReason
from dsh_terminal_fish import AbandonedLines

from ..helpers import full_access, harness, open_shell, send
from ..shells import each_shell, exit_with  # noqa: F401  (every test runs for each shell)
from ..shells import current as shell

STDIN = WaitReason.STDIN_READ
ALL = ("shell", "zsh", "fish")

# A command replacing the shell's prompt, in each shell's own terms.
_REPLACE_PROMPT = {
    "shell": ("PS1='x$ '", "unset PROMPT_COMMAND"),
    "zsh": ("PS1='x%# '", "precmd_functions=()"),
    "fish": ("function fish_prompt; echo -n 'x> '; end", "functions -e fish_right_prompt"),
}
# A hidden prompt: the shell's own ``read -s`` where the terminal shows it (bash and zsh
# read in line mode with echo off); fish's ``read -s`` edits with its own line editor, whose
# terminal modes are the same hidden or not, so fish asks through a program that hides
# the input on the terminal, as sudo, ssh or getpass do.
_HIDDEN_READ = {
    "shell": "read -r -s -p 'Password: ' pw",
    "zsh": "read -r -s 'pw?Password: '",
    "fish": "sh -c 'printf \"Password: \"; stty -echo; read -r pw; stty echo; "
    "printf %s \"$pw\" | sha256sum'",
}
# What shows the digest of what was typed (fish's program printed it already).
_DIGEST = {"shell": 'printf %s "$pw" | sha256sum', "zsh": 'printf %s "$pw" | sha256sum'}


@pytest.mark.shells(*ALL)
async def test_a_replaced_prompt_never_survives_to_the_next_prompt() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for i, replace in enumerate(_REPLACE_PROMPT[shell()]):
            await send(h, agent, sid, replace)
            result = await send(h, agent, sid, f"echo healed-{i}; {exit_with(3)}")
            assert (result.wait_reason, result.exit_code) == (STDIN, 3), result
            assert result.viewport.rstrip("\n").split("\n")[-1] == f"healed-{i}", result


@pytest.mark.shells("fish")
async def test_user_functions_named_as_the_protocols_commands_change_nothing() -> None:
    # The commands of fish's protocol a function may shadow run through ``builtin``.
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        for name in ("printf", "functions", "commandline", "source", "math"):
            defined = await send(h, agent, sid, f"function {name}; echo shadow-{name}; end")
            assert (defined.wait_reason, defined.exit_code) == (STDIN, 0), defined
        for i in range(5):
            result = await send(h, agent, sid, f"echo still-{i}; {exit_with(4)}")
            assert (result.wait_reason, result.exit_code) == (STDIN, 4), result
            assert result.viewport == f"still-{i}\n", result
        # A Ctrl-C at the prompt runs the protocol's SIGINT handler (``commandline``).
        await h.ctx.terminals.signal(agent, sid, "SIGINT")
        after = await send(h, agent, sid, "echo after")
        assert (after.wait_reason, after.exit_code, after.viewport) == (STDIN, 0, "after\n")


@pytest.mark.shells(*ALL)
async def test_an_incomplete_line_waits_for_its_rest() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        opened = await send(h, agent, sid, "echo 'first")
        # bash and zsh show PS2; fish keeps editing the one command line: either way
        # the shell is reading and no command ran, so no exit code.
        assert (opened.wait_reason, opened.exit_code) == (STDIN, None), opened
        closed = await send(h, agent, sid, "second'")
        assert (closed.wait_reason, closed.exit_code) == (STDIN, 0), closed
        assert closed.viewport.endswith("first\nsecond\n"), closed.viewport


@pytest.mark.shells(*ALL)
async def test_exit_ends_the_session_with_its_status() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        ended = await send(h, agent, sid, "exit 7")
        assert ended.wait_reason is WaitReason.SESSION_EXIT, ended
        assert (ended.session_status.exit_code, ended.session_status.signal) == (7, None)


@pytest.mark.bwrap
@pytest.mark.shells(*ALL)
async def test_a_confined_exit_is_told_from_a_death_by_signal(tmp_path: object) -> None:
    # Under bubblewrap an exit status of 128+n is a death by signal n unless the shell's
    # exit marker says it exited so itself (SPEC §27.4): each shell prints that marker.
    config = {"sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)}}
    async with harness(config) as h:
        agent = h.create_agent("a")
        sid = await open_shell(h, agent)
        # Confined, fish has no UTF-8 locale and draws its mark with ``^J``: still taken out.
        said = await send(h, agent, sid, f"echo confined; {exit_with(2)}")
        assert (said.wait_reason, said.exit_code, said.viewport) == (STDIN, 2, "confined\n")
        ended = await send(h, agent, sid, "exit 137")
        assert (ended.session_status.exit_code, ended.session_status.signal) == (137, None)


@pytest.mark.shells(*ALL)
async def test_a_secret_goes_to_a_hidden_prompt() -> None:
    os.environ["SHELL_PROTOCOL_SECRET"] = "s3cret; not $HOME"
    try:
        config = full_access(secrets={"env": {"token": "SHELL_PROTOCOL_SECRET"}})
        async with harness(config) as h:
            agent = h.create_agent("a")
            sid = await open_shell(h, agent)
            asked = await send(h, agent, sid, _HIDDEN_READ[shell()])
            assert (asked.wait_reason, asked.input_hidden) == (STDIN, True), asked
            typed = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "secret": {"name": "token"}}
            )
            assert not typed.is_error, typed.text
            assert typed.value["waitReason"] == "stdin_read", typed.value
            assert typed.value["exitCode"] == 0, typed.value
            shown = typed.text
            if shell() in _DIGEST:
                shown = (await send(h, agent, sid, _DIGEST[shell()])).viewport
            digest = hashlib.sha256(b"s3cret; not $HOME").hexdigest()
            assert digest in shown, shown
            assert "s3cret" not in typed.text + shown
    finally:
        del os.environ["SHELL_PROTOCOL_SECRET"]


@pytest.mark.shells(*ALL)
async def test_a_screen_session_settles_with_exit_codes() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type=shell(), screen=True))
        sid = str(opened.session_id)
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=f"echo on; {exit_with(4)}"))
        result = await op.done
        assert (result.wait_reason, result.exit_code) == (STDIN, 4), result


# -- fish's output filter (no shell needed) ------------------------------------------------

_CONTROLS = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
MARK = "⏎".encode() + b" " * 78 + b"\r" + "⏎".encode() + b" \r"
MARKER = b"\x1b]133;D;0\x07"


@pytest.mark.shells("shell")  # pure: runs once
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"hi\r\n" + MARK + MARKER + b"\rdsh> ", b"hi\r\n" + MARKER + b"dsh> "),
        # Output that did not end its line: the mark ends it.
        (b"abc" + MARK + MARKER + b"\rdsh> ", b"abc\n" + MARKER + b"dsh> "),
        # A screen session's colours around the glyph, and fish's title between.
        (
            b"hi\r\n\x1b[2m" + "⏎".encode() + b"\x1b(B\x1b[m" + b" " * 78 + b"\r"
            + "⏎".encode() + b" \r\x1b[K" + MARKER + b"\x1b]0;~\x07\x1b[30m\rdsh> ",
            b"hi\r\n" + MARKER + b"\x1b]0;~\x07\x1b[30mdsh> ",
        ),
        # Without a UTF-8 locale the glyph is ``^J``, two columns wide.
        (
            b"hi\r\n^J" + b" " * 78 + b"\r^J  \r" + MARKER + b"\rdsh> ",
            b"hi\r\n" + MARKER + b"dsh> ",
        ),
        # Text that only looks like parts of it stays.
        (b"cd ~ ; echo \xe2\x8f\x8e done\r\n", b"cd ~ ; echo \xe2\x8f\x8e done\r\n"),
    ],
)
def test_fish_drawing_around_a_prompt_is_taken_out_wherever_the_pieces_split(
    raw: bytes, expected: bytes
) -> None:
    whole = AbandonedLines(80)
    assert whole(raw) + whole(b"") == expected
    for cut in range(1, len(raw)):
        split = AbandonedLines(80)
        # A control sequence a piece ended inside may stay whole: it draws no text, and
        # the sanitizer drops it.
        out = split(raw[:cut]) + split(raw[cut:]) + split(b"")
        assert _CONTROLS.sub(b"", out) == _CONTROLS.sub(b"", expected), cut


@pytest.mark.bwrap
@pytest.mark.shells(*ALL)
async def test_a_world_runs_each_shell() -> None:
    # The world agent loads the zsh and fish backends where they are installed, and the
    # session settles there with its exit code as it does locally.
    command = [
        shutil.which("bwrap") or "bwrap",
        "--dev-bind", "/", "/",
        "--unshare-pid", "--die-with-parent", "--proc", "/proc",
        sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio",
    ]  # fmt: skip
    config = full_access(worlds={"worlds": {"w": {"command": command}}})
    async with harness(config) as h:
        agent = h.create_agent("a")
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type=shell(), world="w"))
        sid = str(opened.session_id)
        result = await send(h, agent, sid, f"echo in-world; {exit_with(5)}")
        assert (result.wait_reason, result.exit_code) == (STDIN, 5), result
        assert result.viewport.rstrip("\n").split("\n")[-1] == "in-world", result


@pytest.mark.shells(*ALL)
async def test_ctx_pty_runs_over_each_shell() -> None:
    # ctx.pty's backend_type picks the shell; env is exported with `export NAME='value'`,
    # which fish runs through its own export function.
    config = full_access(**{"pty-session": {"backend_type": shell()}})
    async with harness(config) as h:
        agent = h.create_agent("a")
        opened = await h.ctx.pty.open(
            agent, {"command": "echo $GREETING-pty", "env": {"GREETING": "it's $HOME"}}
        )
        assert "it's $HOME-pty" in opened.initial_output.split("\n"), opened.initial_output
        assert await h.ctx.pty.close(agent, opened.session_id) is True
