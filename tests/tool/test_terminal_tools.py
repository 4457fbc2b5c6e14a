"""The terminal tools against real bash, through Harness.call_tool."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import MIN_REQUEST_BYTES, ReadRequest

from ..helpers import TERMINAL_TOOLS, full_access

SNAPSHOT = Path(__file__).with_name("tool_schemas.snapshot.json")


async def test_schemas_match_the_committed_snapshot() -> None:
    async with Harness(config=full_access()) as h:
        schemas = {s["name"]: s for s in h.tool_schemas() if s["name"] in TERMINAL_TOOLS}
    assert sorted(schemas) == sorted(TERMINAL_TOOLS)
    current = json.dumps([schemas[n] for n in TERMINAL_TOOLS], indent=2, sort_keys=True) + "\n"
    if os.environ.get("DSH_UPDATE_SNAPSHOTS") == "1":  # a deliberate schema change
        SNAPSHOT.write_text(current)
    assert current == SNAPSHOT.read_text(), "tool schemas changed; update the snapshot deliberately"


async def test_open_send_read_list_close_values_and_text(tmp_path: Path) -> None:
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell", "name": "main"})
        assert not opened.is_error
        sid = opened.value["sessionId"]
        assert sid.startswith("pty-")
        assert opened.value["name"] == "main" and opened.value["type"] == "shell"
        assert opened.value["status"] == {"kind": "running"}
        assert isinstance(opened.value["pid"], int)
        assert opened.text.startswith(f"started terminal session {sid} (main) [type: shell]")

        sent = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "echo hi; false"}
        )
        assert sent.value == {
            "kind": "foreground",
            "viewport": "hi\n",
            "waitReason": "stdin_read",
            "sessionStatus": {"kind": "running"},
            "truncated": False,
            "exitCode": 1,
            "inputHidden": False,
        }
        assert sent.text == "hi\n[stdin_read: waiting for input; exit code 1]"

        await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "seq 1 50"})
        read = await h.call_tool(
            agent, "terminal_read", {"sessionId": sid, "offset": 1, "count": 3}
        )
        assert set(read.value) == {
            "text", "totalLines", "lineBegin", "lineEnd", "truncated", "more"
        }  # fmt: skip
        assert (read.value["lineBegin"], read.value["lineEnd"]) == (1, 3)  # 1-based, inclusive
        assert read.value["more"] == {"offset": 4}  # the text's paging hint, as a field
        assert read.text.startswith(f"[{sid} lines 1-3 of {read.value['totalLines']}]")
        assert read.text.endswith("[more: terminal_read offset=4]")
        assert len(read.value["text"].split("\n")) == 3
        nxt = await h.call_tool(
            agent, "terminal_read", {"sessionId": sid, "offset": 4, "count": 50}
        )
        [fourth, *_] = nxt.value["text"].split("\n")
        assert fourth == h.ctx.terminals.read(agent, sid, ReadRequest(offset=4, count=1)).text
        last = nxt.value["lineEnd"]
        assert last - 4 + 1 == len(nxt.value["text"].split("\n"))  # the range counts what is shown
        assert nxt.text.startswith(f"[{sid} lines 4-{last} of {nxt.value['totalLines']}]")

        listed = await h.call_tool(agent, "terminal_list", {})
        [snap] = listed.value["sessions"]
        assert (
            snap["sessionId"] == sid
            and snap["name"] == "main"
            and snap["cwd"] == str(tmp_path.resolve())
        )
        assert sid in listed.text and "running" in listed.text

        closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert (closed.value, closed.text) == ({"closed": True}, f"closed {sid}")
        again = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert again.is_error and again.text.startswith("error [NO_SESSION]")


async def test_signal_interrupts_a_foreground_sleep() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        send = asyncio.ensure_future(
            h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "sleep 30"})
        )
        await asyncio.sleep(0.3)
        sig = await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        assert sig.value["delivered"] is True and isinstance(sig.value["targetPgid"], int)
        assert sig.text == f"delivered SIGINT to process group {sig.value['targetPgid']}"
        result = await send
        assert (result.value["waitReason"], result.value["exitCode"]) == ("stdin_read", 130)
        refused = await h.call_tool(
            agent, "terminal_signal", {"sessionId": sid, "signal": "SIGKILL"}
        )
        assert refused.is_error and "close the session instead" in refused.text


async def test_background_send_job_output_and_completion_notice() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        started = await h.call_tool(
            agent,
            "terminal_send",
            {
                "sessionId": sid,
                "text": "for i in 1 2 3; do echo tick-$i; sleep 0.2; done",
                "run_in_background": True,
            },
        )
        assert started.value["kind"] == "background"
        job = started.value["jobId"]
        assert job.startswith("job-") and job in started.text
        busy = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo no"})
        assert busy.is_error and "SEND_ACTIVE" in busy.text
        first = await h.call_tool(agent, "job_output", {"jobId": job})
        out = await h.call_tool(
            agent, "job_output", {"jobId": job, "wait": True, "timeoutMs": 10000}
        )
        assert out.value["status"] == "completed"
        collected = first.value["output"] + out.value["output"]
        assert all(f"tick-{i}" in collected for i in (1, 2, 3))
        assert collected.count("tick-1\n") == 1  # incremental: nothing resent
        assert "exit code 0" in out.value["result"]
        # job_output reported the end, so the end notice is not repeated to the agent.
        assert [n.data.get("jobId") for n in agent.drain_notices()] == []
        other = h.create_agent("b")
        foreign = await h.call_tool(other, "job_output", {"jobId": job})
        assert foreign.is_error and "FOREIGN_JOB" in foreign.text


async def test_job_kill_interrupts_the_background_send() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        started = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "sleep 30", "run_in_background": True},
        )
        job = started.value["jobId"]
        await asyncio.sleep(0.3)
        killed = await h.call_tool(agent, "job_kill", {"jobId": job})
        assert killed.value == {"jobId": job, "killed": True}
        out = await h.call_tool(
            agent, "job_output", {"jobId": job, "wait": True, "timeoutMs": 10000}
        )
        assert out.value["status"] == "killed"
        assert "exit code 130" in out.value["result"]
        after = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo after"})
        assert after.value["viewport"] == "after\n"


async def test_background_disabled_removes_the_argument_and_rejects_it() -> None:
    config = full_access(**{"tool-terminal": {"enable_run_in_background": False}})
    async with Harness(config=config) as h:
        [send] = [s for s in h.tool_schemas() if s["name"] == "terminal_send"]
        assert "run_in_background" not in send["parameters"]["properties"]
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        forced = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "echo x", "run_in_background": True}
        )
        assert forced.is_error and forced.text.startswith("error [INVALID_ARGUMENT]")
        assert "run_in_background" in forced.text


async def test_background_without_jobs_service_fails_before_writing() -> None:
    from dsh_terminal_bash import plugin as bash_plugin
    from dsh_terminal_core.provider import plugin as subprocess_local
    from dsh_terminal_core.registry import plugin as terminals
    from dsh_terminal_core.sandbox import (
        bwrap_plugin as sandbox_bwrap,
    )
    from dsh_terminal_core.sandbox import (
        policy_plugin as sandbox_policy,
    )
    from dsh_tool_terminal import plugin as tool_plugin

    plugins = [subprocess_local, terminals, sandbox_policy, sandbox_bwrap, bash_plugin, tool_plugin]
    async with Harness(plugins=plugins, config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        failed = await h.call_tool(
            agent,
            "terminal_send",
            {
                "sessionId": sid,
                "text": "touch /tmp/should-not-exist-$$; echo WROTE",
                "run_in_background": True,
            },
        )
        assert failed.is_error and failed.text.startswith("error [NO_JOBS_SERVICE]")
        page = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        assert "WROTE" not in page.value["text"]


@pytest.mark.parametrize("cap", [64, 300])
async def test_every_result_is_capped_on_code_points(cap: int) -> None:
    async with Harness(config=full_access(**{"tool-terminal": {"max_result_bytes": cap}})) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]
        assert sid in opened.text and len(opened.text.encode()) <= cap
        sent = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "for i in $(seq 1 200); do printf 'é漢'; done; echo"},
        )
        data = sent.text.encode()
        assert len(data) <= cap
        data.decode("utf-8")  # raises if a code point was cut
        # The value is bounded too, at the smallest bound a send may ask for, head and tail.
        assert len(sent.value["viewport"].encode()) <= MIN_REQUEST_BYTES
        assert sent.value["viewport"].endswith("漢\n") and sent.value["truncated"]
        if cap >= 300:
            assert "bytes truncated" in sent.text and sent.text.endswith("fit, as marked above]")
        error = await h.call_tool(agent, "terminal_read", {"sessionId": "pty-" + "9" * 60})
        assert error.is_error and len(error.text.encode()) <= cap
        assert error.text.startswith("error [NO_SESSION]")


@pytest.mark.parametrize(
    ("tool", "args", "fragment"),
    [
        ("terminal_open", {"type": "shell", "bogus": 1}, "unknown argument 'bogus'"),
        ("terminal_open", {"type": 7}, "'type' must be of type string"),
        ("terminal_open", {"screen": "yes"}, "'screen' must be of type boolean"),
        ("terminal_open", {"rows": 1}, "'rows' must be >= 2"),
        ("terminal_send", {"sessionId": "pty-1", "keys": []}, "'keys': [] should be non-empty"),
        ("terminal_send", {"sessionId": "pty-1", "text": 7}, "'text' must be of type string"),
        ("terminal_signal", {"sessionId": "pty-1", "signal": "SIGUSR1"}, "must be one of"),
        ("terminal_read", {"sessionId": "pty-1", "offset": 0}, "'offset' must be >= 1"),
        ("terminal_read", {"sessionId": "pty-1", "count": 0}, "'count' must be >= 1"),
        (
            "terminal_send",
            {"sessionId": "pty-1", "text": "x", "submit": "yes"},
            "'submit' must be of type boolean",
        ),
    ],
)
async def test_argument_rejections(tool: str, args: dict[str, object], fragment: str) -> None:
    async with Harness(config=full_access()) as h:
        result = await h.call_tool(h.create_agent("a"), tool, args)
        assert result.is_error and result.text.startswith("error [INVALID_ARGUMENT]")
        assert fragment in result.text


async def test_foreign_session_is_refused_on_every_tool() -> None:
    async with Harness(config=full_access()) as h:
        owner, intruder = h.create_agent("owner"), h.create_agent("owner")  # same id, other agent
        sid = (await h.call_tool(owner, "terminal_open", {"type": "shell"})).value["sessionId"]
        await h.call_tool(owner, "terminal_send", {"sessionId": sid, "text": "echo private-data"})
        calls = [
            ("terminal_send", {"sessionId": sid, "text": "echo hijack"}),
            ("terminal_send", {"sessionId": sid, "text": "echo hijack", "run_in_background": True}),
            ("terminal_read", {"sessionId": sid}),
            ("terminal_signal", {"sessionId": sid, "signal": "SIGINT"}),
            ("terminal_close", {"sessionId": sid}),
        ]
        for tool, args in calls:
            result = await h.call_tool(intruder, tool, args)
            assert result.is_error and result.text.startswith("error [FOREIGN_SESSION]"), (
                tool,
                result.text,
            )
            assert "private-data" not in result.text
        assert (await h.call_tool(intruder, "terminal_list", {})).value == {"sessions": []}
        still = await h.call_tool(owner, "terminal_send", {"sessionId": sid, "text": "echo mine"})
        assert still.value["viewport"] == "mine\n"


async def test_guidance_is_in_the_system_prompt() -> None:
    async with Harness(config=full_access()) as h:
        prompt = h.system_prompt()
    assert "## Persistent terminals" in prompt
    flat = " ".join(prompt.split())
    assert '"inferred_idle" only means no output arrived' in flat
    assert "neither proves the command finished" in flat
    assert "one-shot" not in flat  # no such tool is offered here
    assert "close them (terminal_close)" in flat and "run_in_background=true" in flat
    assert "lines are numbered from 1" in flat


@pytest.mark.parametrize("background", [True, False])
async def test_guidance_names_only_tools_that_are_offered(background: bool) -> None:
    import re

    config = full_access(**{"tool-terminal": {"enable_run_in_background": background}})
    async with Harness(config=config) as h:
        prompt = h.system_prompt()
        offered = {s["name"] for s in h.tool_schemas()}
    named = set(re.findall(r"\b(?:terminal|pty|job)_[a-z]+\b", prompt))
    assert named and named <= offered, named - offered
    assert ("run_in_background" in prompt) is background
