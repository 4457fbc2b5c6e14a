"""Watch links over the loopback page server, driven over HTTP (no browser)."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access
from .support import events, request


async def _open(h: Harness, agent: object, **args: object) -> str:
    opened = await h.call_tool(agent, "terminal_open", dict(args))  # type: ignore[arg-type]
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


async def test_a_control_link_shows_takes_types_and_hands_back() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        watch = await h.call_tool(agent, "terminal_watch", {"sessionId": sid, "control": True})
        assert not watch.is_error, watch.text
        url = watch.value["url"]
        assert url.startswith("http://127.0.0.1:") and watch.value["control"] is True
        page = await request("GET", url)
        assert page.status == 200 and b'id="terminal"' in page.body
        assert b'id="take-control"' in page.body and b'id="hand-back"' in page.body
        async with events(url) as stream:
            assert stream.status == 200
            assert (await stream.until("state"))["control"] == "agent"
            sent = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo tok-1"}
            )
            assert not sent.is_error
            await stream.until("screen", lambda v: "tok-1" in v["text"])
            taken = await request("POST", url + "/control", {"action": "take"})
            assert taken.status == 200 and taken.json() == {"state": "person"}
            refused = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo x"}
            )
            assert "[HUMAN_CONTROL]" in refused.text
            typed = await request("POST", url + "/keys", {"data": "echo from-person\r"})
            assert typed.status == 200, typed.body
            await stream.until("screen", lambda v: "from-person\n" in v["text"])
            back = await request("POST", url + "/control", {"action": "hand_back"})
            assert back.json() == {"state": "agent"}
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo after"})
        assert not sent.is_error and "human" in sent.value, sent.value
        human = sent.value["human"]
        read = await h.call_tool(
            agent,
            "terminal_read",
            {"sessionId": sid, "offset": human["lineBegin"], "count": 5},
        )
        assert "from-person" in read.value["text"]


async def test_read_only_guessed_expired_and_closed_links() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        plain = await h.call_tool(agent, "terminal_watch", {"sessionId": sid})
        url = plain.value["url"]
        page = await request("GET", url)
        assert page.status == 200 and b'id="take-control"' not in page.body
        for what, body in (("control", {"action": "take"}), ("keys", {"data": "x"})):
            refused = await request("POST", f"{url}/{what}", body)
            assert refused.status == 403 and refused.body == b""
        guessed = url[:-4] + "AAAA"
        for target in (guessed, guessed + "/events", url.rsplit("/", 1)[0] + "/"):
            missing = await request("GET", target)
            assert missing.status == 404 and missing.body == b""
        short = await h.call_tool(agent, "terminal_watch", {"sessionId": sid, "ttlS": 1})
        await asyncio.sleep(1.2)
        gone = await request("GET", short.value["url"])
        assert gone.status == 404 and gone.body == b""
        async with events(url) as stream:
            await stream.until("state")
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            assert (await stream.until("end"))["reason"] == "closed"
        closed = await request("GET", url)
        assert closed.status == 404 and closed.body == b""


async def test_a_secret_typed_at_a_hidden_prompt_never_reaches_the_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "s3cret-Value_never-shown"
    monkeypatch.setenv("HUMAN_TEST_SECRET", secret)
    config = full_access(secrets={"env": {"db": "HUMAN_TEST_SECRET"}})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent, screen=True)
        url = (await h.call_tool(agent, "terminal_watch", {"sessionId": sid})).value["url"]
        async with events(url) as stream:
            hidden = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "read -r -s -p 'pw: ' pw"}
            )
            assert hidden.value["inputHidden"] is True, hidden.value
            typed = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "secret": {"name": "db"}}
            )
            assert not typed.is_error, typed.text
            await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo done-$((1))"}
            )
            view = await stream.until("screen", lambda v: "done-1" in v["text"])
            assert secret not in view["text"]
        page = await request("GET", url)
        assert secret.encode() not in page.body
