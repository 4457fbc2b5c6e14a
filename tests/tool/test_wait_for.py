"""terminal_send's waitFor: settle ``matched`` on a line of output (SPEC §19.4)."""

from __future__ import annotations

import re
from pathlib import Path

import psutil

from dsh_terminal_core.kernel.errors import InvalidArgument
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry.linematch import (
    MAX_PATTERN_CHARS,
    LineMatcher,
    compile_line_pattern,
)

from ..helpers import full_access

# Prints its line after a pause, then keeps running: a server that came up.
SERVER = (
    "python3 -u -c \"import time; time.sleep(0.3); print('warming up'); "
    "print('Listening on 127.0.0.1:8000'); time.sleep(60)\""
)


async def _open(h: Harness, agent: object) -> str:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})  # type: ignore[arg-type]
    return str(opened.value["sessionId"])


async def test_send_settles_matched_on_the_line_and_the_program_keeps_running() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        sent = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": SERVER, "waitFor": r"Listening on \S+"},
        )
        value = sent.value
        assert value["waitReason"] == "matched", value
        assert value["exitCode"] is None
        assert value["match"]["line"] == "Listening on 127.0.0.1:8000"
        assert value["viewport"].endswith("Listening on 127.0.0.1:8000\n")
        assert "[matched: line" in sent.text
        # The number is the line terminal_read shows there.
        number = value["match"]["lineNumber"]
        read = await h.call_tool(
            agent, "terminal_read", {"sessionId": sid, "offset": number, "count": 1}
        )
        assert read.value["text"] == "Listening on 127.0.0.1:8000"
        # Nothing was signalled: the program still runs in the foreground.
        listed = await h.call_tool(agent, "terminal_list", {})
        shell = psutil.Process(listed.value["sessions"][0]["pid"])
        assert any("python3" in p.name() for p in shell.children(recursive=True))
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        after = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo back"})
        assert after.value["waitReason"] == "stdin_read" and after.value["viewport"] == "back\n"
        await agent.dispose()


async def test_the_echoed_command_line_never_matches() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        # The command line itself contains the pattern; only its output may match.
        sent = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "sleep 0.2; echo READY-42", "waitFor": "READY-[0-9]+"},
        )
        assert sent.value["waitReason"] in ("matched", "stdin_read")
        if sent.value["waitReason"] == "matched":
            assert sent.value["match"]["line"] == "READY-42"
        else:  # the prompt came in the same piece and the ladder settled first
            assert sent.value["viewport"] == "READY-42\n"
        # A command that never prints it settles on its prompt, with the exit code.
        sent = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "echo nope; false", "waitFor": "nope!"},
        )
        assert sent.value["waitReason"] == "stdin_read" and sent.value["exitCode"] == 1
        assert "match" not in sent.value
        await agent.dispose()


async def test_a_line_written_in_pieces_matches_once_complete() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        text = "printf 'Liste'; sleep 0.3; printf 'ning on 9\\n'; sleep 30"
        sent = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": text, "waitFor": "^Listening on 9$"}
        )
        assert sent.value["waitReason"] == "matched"
        assert sent.value["match"]["line"] == "Listening on 9"
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        await agent.dispose()


async def test_an_invalid_pattern_types_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "typed"
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        before = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        for bad in ["(", "a" * (MAX_PATTERN_CHARS + 1), ""]:
            sent = await h.call_tool(
                agent,
                "terminal_send",
                {"sessionId": sid, "text": f"touch {marker}", "waitFor": bad},
            )
            assert sent.is_error and "INVALID_ARGUMENT" in sent.text, sent.text
        after = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        assert after.value["totalLines"] == before.value["totalLines"]
        assert not marker.exists()
        secret = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "secret": {"name": "x"}, "waitFor": "ok"},
        )
        assert secret.is_error and "INVALID_ARGUMENT" in secret.text
        await agent.dispose()


async def test_background_job_completes_on_the_match_with_output_through_that_line() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        text = "for i in 1 2 3 4; do echo step$i; sleep 0.1; done; sleep 30"
        started = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": text, "waitFor": "step2", "run_in_background": True},
        )
        job = started.value["jobId"]
        out = await h.call_tool(agent, "job_output", {"jobId": job, "wait": True})
        assert out.value["status"] == "completed"
        assert out.value["output"].endswith("step1\nstep2\n"), out.value["output"]
        assert out.value["result"].startswith("[matched: line")
        kinds = [notice.kind for notice in agent.drain_notices()]
        assert "matched" in kinds
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        await agent.dispose()


def test_one_matcher_rule_for_every_caller() -> None:
    matcher = LineMatcher(compile_line_pattern("^NAME$"), echoes=["man ls"], prompts=["dsh> "])
    # The echo is skipped, a line is matched as shown (man's bold), numbers count from 1.
    assert matcher.feed("dsh> man ls\nN\bNA\bAM\bME\bE\nrest\n", first_line=4) is not None
    assert matcher.matched is not None
    assert matcher.matched.line == "NAME" and matcher.matched.line_number == 6
    for bad in ["(", "", "x" * (MAX_PATTERN_CHARS + 1)]:
        try:
            compile_line_pattern(bad)
        except InvalidArgument:
            continue
        raise AssertionError(f"{bad[:10]!r} was accepted")
    assert compile_line_pattern(re.compile("ok")).pattern == "ok"


async def test_pty_wait_shares_the_pattern_rules() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = await h.ctx.pty.open(agent, {"command": "cat"})
        try:
            await h.ctx.pty.wait(agent, opened.session_id, "x" * (MAX_PATTERN_CHARS + 1), 10)
        except InvalidArgument as exc:
            assert str(MAX_PATTERN_CHARS) in str(exc)
        else:
            raise AssertionError("a pattern over the bound was accepted")
        await agent.dispose()
