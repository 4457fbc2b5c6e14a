"""The control gate of the registry (SPEC §22) against real bash, without any page."""

from __future__ import annotations

import asyncio

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest

from ..helpers import full_access


async def _open(h: Harness, agent: object) -> str:
    opened = await h.call_tool(agent, "terminal_open", {})  # type: ignore[arg-type]
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


async def test_agent_refused_while_a_person_types_and_told_after() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        terminals = h.ctx.terminals
        assert await terminals.take_control(agent, sid) is True
        assert await terminals.take_control(agent, sid) is False  # already a person's
        for name, args in (
            ("terminal_send", {"sessionId": sid, "text": "echo agent"}),
            ("terminal_signal", {"sessionId": sid, "signal": "SIGINT"}),
            ("terminal_resize", {"sessionId": sid, "rows": 30, "cols": 100}),
        ):
            refused = await h.call_tool(agent, name, args)
            assert refused.is_error and "[HUMAN_CONTROL]" in refused.text, refused.text
            assert "terminal_read" in refused.text and "person" in refused.text
        await terminals.type_as_person(agent, sid, "echo from-person\r")
        report = await terminals.hand_back(agent, sid)
        assert report is not None and report.line_end > report.line_begin
        kinds = [n.kind for n in agent.drain_notices()]
        assert kinds == ["human_control", "human_returned"]
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo agent"})
        assert not sent.is_error, sent.text
        assert "agent" in sent.value["viewport"] and "from-person" not in sent.value["viewport"]
        page = terminals.read(agent, sid, ReadRequest(offset=report.line_begin, count=10))
        assert "from-person" in page.text


async def test_taking_control_waits_for_the_send_in_flight() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        terminals = h.ctx.terminals
        op = terminals.start_send(agent, sid, SendRequest(text="sleep 0.5; echo slept"))
        take = asyncio.ensure_future(terminals.take_control(agent, sid))
        await asyncio.sleep(0.1)
        assert not take.done()  # the person waits for the agent's command
        assert terminals.in_human_control(agent, sid)  # and no new agent send starts
        result = await op.done
        assert "slept" in result.viewport and result.exit_code == 0
        assert await take is True
        await terminals.hand_back(agent, sid)
