"""The tools answer alike where they mean alike (SPEC §25.5).

A send to a session whose shell exited is the error ``SESSION_EXITED`` (as
``terminal_resize`` and ``terminal_signal`` answer), not a success reading "session
exited"; ``job_output`` does not repeat the end notice of the job it reports; the
``pty_*`` tools advise ``pty_*`` tools; ``terminal_list`` says which surface opened a
session.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dsh_terminal_core.kernel.agents import Agent, Notice
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SpawnRequest

from ..helpers import full_access


async def _exited_shell(h: Harness, agent: Agent) -> str:
    sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
    ended = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "exit 3"})
    # The send in flight when the shell exits is a result, as before.
    assert ended.value["waitReason"] == "session_exit", ended.text
    return str(sid)


async def test_every_kind_of_send_to_an_exited_shell_is_session_exited() -> None:
    async with Harness(config=full_access(secrets={"env": {"pw": "HOME"}})) as h:
        agent = h.create_agent("a")
        sid = await _exited_shell(h, agent)
        sends: list[dict[str, Any]] = [
            {"text": "echo x"},
            {"keys": ["Enter"]},
            {},  # only waiting
            {"text": "sleep 1", "run_in_background": True},
            {"secret": {"name": "pw"}},
        ]
        for extra in sends:
            result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, **extra})
            assert result.is_error, (extra, result.text)
            assert result.text == (
                f"error [SESSION_EXITED]: session {sid} has exited (exit code 3); nothing "
                "was sent; terminal_read still shows its output; terminal_close it and "
                "terminal_open a new one"
            ), extra
        # No background job was started for the refused background send.
        assert h.ctx.jobs.list(agent) == []
        resized = await h.call_tool(
            agent, "terminal_resize", {"sessionId": sid, "rows": 9, "cols": 40}
        )
        assert resized.text.startswith("error [SESSION_EXITED]")
        # Its output stays readable, and it closes as any session does.
        page = await h.call_tool(agent, "terminal_read", {"sessionId": sid})
        assert "exit 3" in page.value["text"]
        closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert closed.value == {"closed": True}


async def test_an_argument_error_is_still_named_before_the_exit() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _exited_shell(h, agent)
        both = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "x", "keys": ["Enter"]}
        )
        assert both.text.startswith("error [INVALID_ARGUMENT]"), both.text
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})


async def test_pty_send_to_an_exited_session_is_session_exited_with_pty_advice() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = (await h.call_tool(agent, "pty_open", {"command": "exit 4"})).value
        assert opened["status"]["kind"] == "exited"
        sid = opened["sessionId"]
        refused = await h.call_tool(agent, "pty_send", {"id": sid, "data": "echo x"})
        assert refused.text == (
            f"error [SESSION_EXITED]: session {sid} has exited (exit code 4); nothing was "
            "sent; pty_tail still returns its last lines; pty_close it and pty_open a new one"
        )
        # The facade itself keeps its contract: a consumer's send reports the status.
        sent = await h.ctx.pty.send(agent, sid, {"data": ""})
        assert sent.status.kind == "exited"
        assert (await h.call_tool(agent, "pty_close", {"id": sid})).value == {"closed": True}


async def test_pty_refusals_advise_pty_tools() -> None:
    config = full_access(terminals={"max_sessions_per_owner": 1})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        for tool, args in (
            ("pty_send", {"id": "pty-9", "data": "x"}),
            ("pty_tail", {"id": "pty-9"}),
        ):
            result = await h.call_tool(agent, tool, args)
            assert result.text == (
                "error [NO_SESSION]: no terminal session 'pty-9'; pty_open starts a session "
                "and returns its id"
            ), tool
        sid = (await h.call_tool(agent, "pty_open", {"command": "true"})).value["sessionId"]
        full = await h.call_tool(agent, "pty_open", {"command": "true"})
        assert full.text.startswith("error [SESSION_LIMIT]"), full.text
        assert full.text.endswith("close sessions you no longer need with pty_close")
        busy = asyncio.ensure_future(
            h.call_tool(agent, "pty_send", {"id": sid, "data": "sleep 30"})
        )
        await asyncio.sleep(0.3)
        second = await h.call_tool(agent, "pty_send", {"id": sid, "data": "echo x"})
        assert second.text.startswith("error [SEND_ACTIVE]"), second.text
        assert "pty_send" in second.text and "terminal_" not in second.text
        await h.call_tool(agent, "pty_close", {"id": sid})
        await asyncio.wait_for(busy, 10)
        # The terminal tools keep their own advice.
        missing = await h.call_tool(agent, "terminal_read", {"sessionId": "pty-9"})
        assert missing.text.endswith("terminal_list shows the open ones")


def test_a_refusal_keeps_its_code_and_fact_under_other_advice() -> None:
    error = TerminalError("no terminal session 'x'", "NO_SESSION", advice="terminal_list helps")
    assert error.message == "no terminal session 'x'; terminal_list helps"
    other = error.advised("pty_open starts one")
    assert (other.code, other.fact, other.message) == (
        "NO_SESSION",
        "no terminal session 'x'",
        "no terminal session 'x'; pty_open starts one",
    )
    assert TerminalError("plain", "NO_SESSION").message == "plain"


async def test_job_output_withdraws_only_its_own_end_notice() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        first = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
        second = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
        jobs = []
        for sid in (first, second):
            started = await h.call_tool(
                agent,
                "terminal_send",
                {"sessionId": sid, "text": "true", "run_in_background": True},
            )
            jobs.append(started.value["jobId"])
        for job in jobs:
            await asyncio.wait_for(h.ctx.jobs.get(agent, job).finished.wait(), 10)
        agent.notify(Notice(kind="other", text="unrelated", data={"jobId": jobs[0]}))
        running = await h.call_tool(agent, "job_output", {"jobId": jobs[0]})
        assert running.value["status"] == "completed"
        left = agent.drain_notices()
        assert [(n.kind, n.data.get("jobId")) for n in left] == [
            ("job_finished", jobs[1]),
            ("other", jobs[0]),
        ]
        for sid in (first, second):
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})


async def test_a_running_job_keeps_its_notice_for_later() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
        job = (
            await h.call_tool(
                agent,
                "terminal_send",
                {"sessionId": sid, "text": "sleep 0.3", "run_in_background": True},
            )
        ).value["jobId"]
        early = await h.call_tool(agent, "job_output", {"jobId": job})
        assert early.value["status"] == "running"
        await asyncio.wait_for(h.ctx.jobs.get(agent, job).finished.wait(), 10)
        # Nobody has reported this end yet: the notice waits for the next turn.
        assert [n.data["jobId"] for n in agent.drain_notices()] == [job]
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})


async def test_terminal_list_says_which_surface_opened_each_session() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        by_tool = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
        by_pty = (await h.call_tool(agent, "pty_open", {"command": "true"})).value["sessionId"]
        plugin = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        listed = await h.call_tool(agent, "terminal_list", {})
        assert {s["sessionId"]: s["openedBy"] for s in listed.value["sessions"]} == {
            by_tool: "terminal",
            by_pty: "pty",
            plugin.session_id: None,
        }
        lines = listed.text.splitlines()
        assert "opened by" not in lines[0] and lines[1].endswith("opened by pty")
        assert "opened by" not in lines[2]


async def test_an_empty_opened_by_is_refused() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        try:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", opened_by=""))
        except TerminalError as exc:
            assert exc.code == "INVALID_ARGUMENT" and "opened_by" in exc.message
        else:
            raise AssertionError("an empty opened_by was accepted")
