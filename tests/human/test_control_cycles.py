"""Fifty take/hand-back cycles over the HTTP endpoints, the agent sending between them."""

from __future__ import annotations

import asyncio
import time

import anyio

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest

from ..helpers import full_access
from .support import request

CYCLES = 50
BOUND_S = 120


async def test_fifty_cycles_lose_no_send_and_settle_none_on_the_persons_input() -> None:
    with anyio.fail_after(BOUND_S):
        async with Harness(config=full_access()) as h:
            agent = h.create_agent("a")
            sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
            url = (
                await h.call_tool(agent, "terminal_watch", {"sessionId": sid, "control": True})
            ).value["url"]
            terminals = h.ctx.terminals
            started = time.monotonic()
            for i in range(CYCLES):
                inflight = None
                if i % 5 == 0:  # control asked for while a send of the agent runs
                    inflight = terminals.start_send(
                        agent, sid, SendRequest(text=f"sleep 0.05; echo inflight-{i}")
                    )
                    await asyncio.sleep(0.01)
                taken = await request("POST", url + "/control", {"action": "take"})
                assert taken.json() == {"state": "person"}, taken.body
                if inflight is not None:
                    settled = inflight.done.result()  # it settled before control was taken
                    assert f"inflight-{i}" in settled.viewport and settled.exit_code == 0
                refused = await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": f"echo lost-{i}"}
                )
                assert "[HUMAN_CONTROL]" in refused.text
                typed = await request("POST", url + "/keys", {"data": f"echo person-{i}\r"})
                assert typed.status == 200, typed.body
                back = await request("POST", url + "/control", {"action": "hand_back"})
                assert back.json() == {"state": "agent"}
                sent = await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": f"echo agent-{i}"}
                )
                value = sent.value
                assert not sent.is_error, sent.text
                assert value["waitReason"] == "stdin_read" and value["exitCode"] == 0, value
                assert f"agent-{i}" in value["viewport"], value
                assert "person-" not in value["viewport"], value
                human = value["human"]
                shown = terminals.read(
                    agent,
                    sid,
                    ReadRequest(
                        offset=human["lineBegin"],
                        count=human["lineEnd"] - human["lineBegin"] + 1,
                    ),
                )
                assert f"person-{i}\n" in shown.text + "\n", (human, shown.text)
            elapsed = time.monotonic() - started
            print(f"{CYCLES} cycles in {elapsed:.2f} s ({elapsed / CYCLES * 1000:.0f} ms each)")
            everything = terminals.read(agent, sid, ReadRequest(offset=1, count=10_000)).text
            assert "lost-" not in everything  # no refused send was typed
            for i in range(CYCLES):
                assert everything.count(f"\nagent-{i}\n") == 1
                assert everything.count(f"\nperson-{i}\n") == 1
