"""Line sessions never drop or invent output (SPEC §27), in the classes of behaviour that
pexpect's and ptyprocess's own suites check, written here against the tools and against
``ctx.pty``, each in both sandbox modes: unconfined and under bubblewrap.

Every assertion is on what the model is given (a send's viewport, a read, a search, a
job's output), with real programs and the production timing defaults.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

from ..helpers import own_descendants

BWRAP = BwrapSandbox(BwrapConfig()).available()

MODES = [
    pytest.param("danger-full-access", id="unconfined"),
    pytest.param(
        "workspace-write",
        id="bwrap",
        marks=[
            pytest.mark.bwrap,
            pytest.mark.skipif(not BWRAP, reason="bubblewrap is not usable here"),
        ],
    ),
]


class Terminal:
    """One agent's shell through the model-facing tools."""

    def __init__(self, h: Harness, agent: Agent, session_id: str) -> None:
        self.h, self.agent, self.sid = h, agent, session_id

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = await self.h.call_tool(self.agent, tool, {"sessionId": self.sid, **args})
        assert not result.is_error, result.text
        return dict(result.value)

    async def send(self, text: str, **args: Any) -> dict[str, Any]:
        return await self.call("terminal_send", text=text, **args)


@pytest.fixture(params=MODES)
async def terminal(request: pytest.FixtureRequest, tmp_path: Any) -> AsyncIterator[Terminal]:
    config = {"sandbox-policy": {"mode": request.param, "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        agent = h.create_agent("behaviours")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        assert not opened.is_error, opened.text
        yield Terminal(h, agent, opened.value["sessionId"])
    assert not [p for p in own_descendants() if p.status() != "zombie"]


# -- echo: stripped only when the terminal echoed ------------------------------------------


async def test_output_of_a_program_reading_with_echo_off_is_kept(terminal: Terminal) -> None:
    started = await terminal.send("stty -echo; cat")
    assert started["inputHidden"] is True
    typed = await terminal.send("abcdé")
    # cat prints the line back; nobody echoed the input, so that is all output.
    assert typed["viewport"] == "abcdé\n"
    assert typed["waitReason"] == "stdin_read"
    await terminal.call("terminal_signal", signal="SIGINT")
    await terminal.call("terminal_send")  # collects the prompt the interrupt brought back
    restored = await terminal.send("stty echo; echo back")
    assert restored["viewport"].endswith("back\n") and restored["exitCode"] == 0


async def test_a_value_read_silently_and_printed_is_kept(terminal: Terminal) -> None:
    await terminal.send('read -s pw; echo "$pw"')
    printed = await terminal.send("not-an-echo-42")
    assert printed["viewport"] == "not-an-echo-42\n"
    assert printed["exitCode"] == 0


async def test_the_echo_of_a_command_line_is_still_dropped(terminal: Terminal) -> None:
    assert (await terminal.send("echo hi"))["viewport"] == "hi\n"
    # Behind a running program, the kernel echoes type-ahead; still identified.
    await terminal.send("cat", timeoutMs=300)
    line = await terminal.send("typed-to-cat")
    assert line["viewport"] == "typed-to-cat\n"  # the kernel's echo dropped, cat's line kept
    await terminal.call("terminal_signal", signal="SIGINT")


# -- carriage returns: as a terminal shows them ----------------------------------------------


async def test_progress_lines_read_as_a_terminal_shows_them(terminal: Terminal) -> None:
    shown = await terminal.send(r"printf 'start\n\rX 0%%\r\rX Done\r\r\nabcdef\rXY\r\nend\n'")
    assert shown["viewport"] == "start\nX Done\nXYcdef\nend\n"
    read = await terminal.call("terminal_read", offset=1, count=500)
    assert "start\nX Done\nXYcdef\nend\n" in read["text"]
    assert "\n\n" not in read["text"]
    found = await terminal.call("terminal_search", pattern="^X Done$", regex=True)
    assert [m["line"] for m in found["matches"]] == ["X Done"]
    job = await terminal.send(r"printf 'job\r\rjob done\r\r\n'", run_in_background=True)
    output = await terminal.h.call_tool(
        terminal.agent, "job_output", {"jobId": job["jobId"], "wait": True, "timeoutMs": 10000}
    )
    assert not output.is_error, output.text
    assert "job done\n" in output.value["output"] and "\n\n" not in output.value["output"]


async def test_a_bare_return_before_the_prompt_keeps_the_line(terminal: Terminal) -> None:
    shown = await terminal.send(r"printf 'kept\r'; (exit 4)")
    assert (shown["viewport"], shown["exitCode"]) == ("kept\n", 4)


# -- omission hints: only lines still retained ---------------------------------------------


async def test_an_omission_hint_names_only_retained_lines(terminal: Terminal) -> None:
    flood = await terminal.send("seq 1 100000")
    assert flood["exitCode"] == 0 and flood["truncated"] is True
    hint = re.search(r"\[… (.*) …\]", flood["viewport"])
    assert hint is not None, flood["viewport"][:2000]
    assert "gone for good" in hint.group(1)
    offset = re.search(r"terminal_read offset=(\d+)", hint.group(1))
    assert offset is not None, hint.group(1)
    page = await terminal.call("terminal_read", offset=int(offset.group(1)), count=3)
    assert page["lineBegin"] == int(offset.group(1))
    numbers = [int(line) for line in page["text"].splitlines()]
    # The hint's lines are the ones that follow the head the viewport shows, in order.
    assert numbers == list(range(numbers[0], numbers[0] + 3))
    head = [line for line in flood["viewport"].split("[…")[0].splitlines() if line.isdigit()]
    assert numbers[0] > int(head[-1])


# -- deaths by signal stay signals -------------------------------------------------------


@pytest.mark.parametrize(("command", "code", "signal"), [
    ("kill -KILL $$", None, "SIGKILL"),
    ("exit 137", 137, None),
    ("kill -SEGV $$", None, "SIGSEGV"),
    ("exit 3", 3, None),
])  # fmt: skip
async def test_a_shell_killed_by_a_signal_is_reported_as_one(
    terminal: Terminal, command: str, code: int | None, signal: str | None
) -> None:
    ended = await terminal.send(command)
    assert ended["waitReason"] == "session_exit"
    status = ended["sessionStatus"]
    assert (status["kind"], status.get("exitCode"), status.get("signal")) == (
        "exited",
        code,
        signal,
    ), status


# -- pexpect's classes: split characters, floods, continuation, unrunnable -----------------


async def test_a_character_split_across_writes_arrives_whole(terminal: Terminal) -> None:
    split = await terminal.send(
        r"printf '\xc3'; sleep 0.2; printf '\xa9\xe6\x97'; sleep 0.2; printf '\xa5\n'"
    )
    assert split["viewport"] == "é日\n"


async def test_a_continuation_prompt_and_unrunnable_commands(terminal: Terminal) -> None:
    opened = await terminal.send("echo 'first")
    assert opened["waitReason"] == "stdin_read" and opened.get("exitCode") is None
    closed = await terminal.send("second'")
    assert closed["viewport"].endswith("first\nsecond\n") and closed["exitCode"] == 0
    missing = await terminal.send("no-such-command-dsh-27")
    assert missing["exitCode"] == 127 and "not found" in missing["viewport"]
    denied = await terminal.send("printf 'data' > plain.txt; ./plain.txt")
    assert denied["exitCode"] == 126


async def test_a_match_after_two_megabytes(terminal: Terminal) -> None:
    found = await terminal.send(
        "for i in $(seq 1 40000); do echo line-$i-padding-padding-padding; done; "
        "echo MARK-27; sleep 30",
        waitFor="^MARK-27$",
    )
    assert found["waitReason"] == "matched" and found["match"]["line"] == "MARK-27"
    page = await terminal.call("terminal_read", offset=found["match"]["lineNumber"], count=1)
    assert page["text"].rstrip("\n") == "MARK-27"
    await terminal.call("terminal_signal", signal="SIGINT")


# -- the same through ctx.pty --------------------------------------------------------------


async def test_ctx_pty_keeps_output_typed_with_echo_off(terminal: Terminal) -> None:
    pty = terminal.h.ctx.pty
    opened = await pty.open(terminal.agent, {"command": "stty -echo; cat"})
    sent = await pty.send(terminal.agent, opened.session_id, {"data": "quiet-line"})
    assert sent.delta == "quiet-line\n"
    progress = await pty.open(terminal.agent, {"command": r"printf 'a 1%%\ra 99%%\r\r\n'"})
    assert progress.initial_output == "a 99%\n"


async def test_window_size_eof_and_a_child_killed_from_outside(terminal: Terminal) -> None:
    size = await terminal.send("stty size")
    assert size["viewport"] == "40 160\n"  # terminal-bash's default size
    await terminal.call("terminal_resize", rows=30, cols=100)
    assert (await terminal.send("stty size"))["viewport"] == "30 100\n"
    await terminal.send("cat > eof.txt")
    await terminal.send("kept-before-eof")
    ended = await terminal.call("terminal_send", keys=["C-d"])
    assert ended["exitCode"] == 0
    assert (await terminal.send("cat eof.txt"))["viewport"] == "kept-before-eof\n"
    started = await terminal.send("sleep 300 & echo pid=$!")
    pid = re.search(r"pid=(\d+)", started["viewport"])
    assert pid is not None
    killed = await terminal.send(f"kill -KILL {pid.group(1)}; wait {pid.group(1)}")
    assert killed["exitCode"] == 137 and killed["sessionStatus"]["kind"] == "running"


async def test_a_child_ignoring_sigint_and_a_flood(terminal: Terminal) -> None:
    stubborn = await terminal.send("trap '' INT; sleep 300", timeoutMs=500)
    assert stubborn["waitReason"] in ("timeout", "inferred_idle")
    await terminal.call("terminal_signal", signal="SIGINT")  # ignored, as asked
    await terminal.call("terminal_signal", signal="SIGKILL")
    back = await terminal.send("trap - INT; echo alive")
    assert back["viewport"].endswith("alive\n")
    # 8 MiB in 100-byte lines: the real end is shown, and the numbering holds.
    flood = await terminal.send(
        "yes 0123456789 | tr -d '\\n' | fold -w 100 | head -c 8388608; echo; echo END-27"
    )
    assert flood["exitCode"] == 0 and flood["viewport"].endswith("END-27\n")
    assert flood["truncated"] is True and "omitted" in flood["viewport"]
    last = await terminal.call("terminal_read", offset=1, count=1)
    tail = await terminal.call("terminal_read", offset=last["totalLines"] - 1, count=1)
    assert tail["text"] == "END-27"


async def test_progress_lines_in_a_screen_session(terminal: Terminal) -> None:
    opened = await terminal.h.call_tool(terminal.agent, "terminal_open", {"screen": True})
    assert not opened.is_error, opened.text
    screen = Terminal(terminal.h, terminal.agent, opened.value["sessionId"])
    shown = await screen.send(r"printf '\rX 0%%\r\rX Done\r\r\n'")
    assert shown["viewport"] == "X Done\n"
