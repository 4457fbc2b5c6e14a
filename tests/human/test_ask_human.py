"""``terminal_ask_human`` end to end: the MCP SDK client's URL elicitation, and in-process.

Over stdio the server is a real subprocess; the client's elicitation callback plays the
person: it accepts, then opens the link, takes control, types and hands back over HTTP.
Over HTTP, watch links are served on the server's own address without a bearer token.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.hookspecs import hookimpl

from ..helpers import full_access
from ..integration.test_mcp_http import TOKEN_A, connect, http_server
from .support import request

BOUND_S = 90
Person = Callable[[types.ElicitRequestURLParams], Awaitable[types.ElicitResult]]


@contextlib.asynccontextmanager
async def stdio_session(
    tmp_path: Path, person: Person | None
) -> AsyncIterator[tuple[list[str], ClientSession]]:
    args = ["-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
    args += ["--workspace", str(tmp_path)]
    # This checkout's sources, as the suite runs them (not whatever is installed).
    params = StdioServerParameters(
        command=sys.executable, args=args, cwd=tmp_path, env=dict(os.environ)
    )
    seen: list[str] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.model_dump_json())
        assert isinstance(params, types.ElicitRequestURLParams), params
        assert person is not None
        return await person(params)

    async def keep(message: Any) -> None:
        seen.append(repr(message))

    with (tmp_path / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read,
                write,
                elicitation_callback=elicit if person is not None else None,
                message_handler=keep,
            ) as session,
        ):
            await session.initialize()
            seen.clear()
            yield seen, session


async def _call(session: ClientSession, name: str, **args: Any) -> types.CallToolResult:
    return await session.call_tool(name, args)


def _text(result: types.CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_ask_human_over_url_elicitation_returns_when_they_hand_back(
    tmp_path: Path,
) -> None:
    helped: list[asyncio.Task[None]] = []

    async def help_out(url: str) -> None:
        page = await request("GET", url)
        assert page.status == 200 and b'id="reason"' in page.body
        assert (await request("POST", url + "/control", {"action": "take"})).status == 200
        await request("POST", url + "/keys", {"data": "echo from-person\r"})
        await request("POST", url + "/control", {"action": "hand_back"})

    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        assert "take over terminal session" in params.message
        helped.append(asyncio.ensure_future(help_out(params.url)))
        return types.ElicitResult(action="accept")

    with anyio.fail_after(BOUND_S):
        async with stdio_session(tmp_path, person) as (seen, session):
            opened = await _call(session, "terminal_open")
            sid = opened.structured_content["sessionId"]
            asked = await _call(
                session, "terminal_ask_human", sessionId=sid, reason="log in to the VPN"
            )
            value = asked.structured_content
            assert value["outcome"] == "handed_back", _text(asked)
            human = value["human"]
            read = await _call(
                session, "terminal_read", sessionId=sid, offset=human["lineBegin"], count=5
            )
            assert "from-person" in read.structured_content["text"]
            sent = await _call(session, "terminal_send", sessionId=sid, text="echo after")
            assert "human" not in sent.structured_content  # reported once, by the ask
            await helped[0]
    joined = "\n".join(seen)
    assert "human_control" in joined and "human_returned" in joined  # clients were woken


async def test_ask_human_declined_and_unavailable(tmp_path: Path) -> None:
    async def decline(_params: types.ElicitRequestURLParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with anyio.fail_after(BOUND_S):
        async with stdio_session(tmp_path, decline) as (_seen, session):
            sid = (await _call(session, "terminal_open")).structured_content["sessionId"]
            asked = await _call(session, "terminal_ask_human", sessionId=sid, reason="help")
            assert asked.structured_content == {"outcome": "declined"}
        async with stdio_session(tmp_path, None) as (_seen, session):
            sid = (await _call(session, "terminal_open")).structured_content["sessionId"]
            asked = await _call(session, "terminal_ask_human", sessionId=sid, reason="help")
            value = asked.structured_content
            assert value["outcome"] == "unavailable" and value["url"] in _text(asked)
            page = await request("GET", value["url"])  # the link works, to pass on
            assert page.status == 200


async def test_watch_links_on_the_http_servers_own_address(tmp_path: Path) -> None:
    with anyio.fail_after(BOUND_S):
        async with http_server(tmp_path) as server, connect(server.url, TOKEN_A) as session:
            sid = (await _call(session, "terminal_open")).structured_content["sessionId"]
            await _call(session, "terminal_send", sessionId=sid, text="echo over-http")
            watch = await _call(session, "terminal_watch", sessionId=sid, control=True)
            url = watch.structured_content["url"]
            assert url.startswith(server.url.removesuffix("/mcp") + "/watch/"), url
            page = await request("GET", url)  # no bearer token: the link is the capability
            assert page.status == 200 and TOKEN_A.encode() not in page.body
            taken = await request("POST", url + "/control", {"action": "take"})
            assert taken.json() == {"state": "person"}
            refused = await _call(session, "terminal_send", sessionId=sid, text="echo no")
            assert refused.is_error and "[HUMAN_CONTROL]" in _text(refused)
            await request("POST", url + "/control", {"action": "hand_back"})
            guessed = await request("GET", url[:-6] + "abcdef")
            assert guessed.status == 404 and guessed.body == b""


class _Host:
    """An in-process host that shows the link by "clicking" it: take, type, hand back."""

    def __init__(self) -> None:
        self.shown: list[tuple[str, str, str]] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.act = True

    @hookimpl
    def dsh_ask_human(self, session_id: str, url: str, reason: str) -> None:
        self.shown.append((session_id, url, reason))
        if self.act:
            self.tasks.append(asyncio.ensure_future(self._help(url)))

    async def _help(self, url: str) -> None:
        await request("POST", url + "/control", {"action": "take"})
        await request("POST", url + "/keys", {"data": "echo hooked\r"})
        await request("POST", url + "/control", {"action": "hand_back"})


async def test_in_process_hook_shows_the_link_and_unused_links_expire() -> None:
    with anyio.fail_after(BOUND_S):
        async with Harness(config=full_access()) as h:
            agent = h.create_agent("a")
            sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
            unasked = await h.call_tool(
                agent, "terminal_ask_human", {"sessionId": sid, "reason": "why"}
            )
            assert unasked.value["outcome"] == "unavailable"  # no host shows links
            host = _Host()
            h.pm.register(host, name="test-host")
            asked = await h.call_tool(
                agent, "terminal_ask_human", {"sessionId": sid, "reason": "type it"}
            )
            assert asked.value["outcome"] == "handed_back", asked.text
            assert host.shown[0][0] == sid and host.shown[0][2] == "type it"
            await host.tasks[0]
            host.act = False
            outcome, link, report = await h.ctx.human.ask(agent, sid, "nobody", None, ttl_s=1)
            assert (outcome, report) == ("expired", None)
            assert (await request("GET", link.url)).status == 404
