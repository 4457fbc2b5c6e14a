"""The 2026-07-28 parts on their own: listen streams' log opt-in, asks kept for a retry.

A listen stream runs on the SDK's own ``ServerSession`` over a recording outbound
channel, as in ``test_mcp_wake``. Negatives are proved by order, not by waiting: a
stream ended by ``Listens.close`` sends everything it had queued before its result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp_types.version import LATEST_MODERN_VERSION

from dsh_terminal_core.kernel.agents import Agent, Notice
from dsh_terminal_core.mcp.asks import PendingAsks
from dsh_terminal_core.mcp.secret_page import SecretPages
from dsh_terminal_core.mcp.wake import Listens
from dsh_terminal_core.secrets import SecretAsk

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


class Wire:
    """Records what a listen stream writes; wakes a waiter on each frame."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.arrived = asyncio.Event()

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        self.sent.append((method, dict(params or {})))
        self.arrived.set()

    async def send_raw_request(self, *_args: Any, **_kwargs: Any) -> dict[str, Any]:
        raise AssertionError("no requests on 2026-07-28")

    async def wait_sent(self, count: int) -> None:
        async def wait() -> None:
            while len(self.sent) < count:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), 5)

    @property
    def methods(self) -> list[str]:
        return [method for method, _ in self.sent]


def _listen_context(wire: Wire, log_level: str | None) -> ServerRequestContext[Any]:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": LATEST_MODERN_VERSION}
    if log_level is not None:
        meta["io.modelcontextprotocol/logLevel"] = log_level
    connection = Connection.from_envelope(
        LATEST_MODERN_VERSION,
        None,
        {},
        outbound=wire,  # type: ignore[arg-type]
    )
    return ServerRequestContext(
        session=ServerSession(wire, connection, request_meta=meta),  # type: ignore[arg-type]
        lifespan_context={},
        protocol_version=LATEST_MODERN_VERSION,
        method="subscriptions/listen",
        request_id="listen-1",
        meta=meta,  # type: ignore[arg-type]
    )


def _params(**wanted: Any) -> types.SubscriptionsListenRequestParams:
    return types.SubscriptionsListenRequestParams(notifications=types.SubscriptionFilter(**wanted))


def _job_done(job: str) -> Notice:
    return Notice(
        kind="job_finished",
        text=f"background job {job} completed",
        data={"jobId": job, "sessionId": "pty-1"},
    )


async def test_a_listen_that_opted_in_at_info_gets_the_agents_notices_tagged() -> None:
    wire, agent, listens = Wire(), Agent("a"), Listens()
    ctx = _listen_context(wire, "info")
    stream = asyncio.ensure_future(listens.serve(ctx, agent, _params(tools_list_changed=True)))
    await wire.wait_sent(1)
    method, ack = wire.sent[0]
    assert method == "notifications/subscriptions/acknowledged"
    assert ack["notifications"] == {"toolsListChanged": True}
    assert ack["_meta"] == {SUBSCRIPTION: "listen-1"}
    agent.notify(_job_done("job-1"))
    agent.notify(Notice(kind="not_announced", text="x"))
    await wire.wait_sent(2)
    method, message = wire.sent[1]
    assert method == "notifications/message"
    assert (message["level"], message["logger"]) == ("info", "dsh-terminal")
    assert message["data"]["event"] == "job_done" and message["data"]["jobId"] == "job-1"
    assert message["_meta"] == {SUBSCRIPTION: "listen-1"}
    listens.close()
    result = await asyncio.wait_for(stream, 5)
    assert result.meta == {SUBSCRIPTION: "listen-1"}
    assert wire.methods == ["notifications/subscriptions/acknowledged", "notifications/message"]
    assert len(listens) == 0


@pytest.mark.parametrize("log_level", [None, "notice", "warning"])
async def test_a_listen_that_did_not_opt_in_at_info_gets_only_its_ack(
    log_level: str | None,
) -> None:
    wire, agent, listens = Wire(), Agent("a"), Listens()
    ctx = _listen_context(wire, log_level)
    stream = asyncio.ensure_future(listens.serve(ctx, agent, _params()))
    await wire.wait_sent(1)
    agent.notify(_job_done("job-1"))
    listens.close()
    await asyncio.wait_for(stream, 5)
    assert wire.methods == ["notifications/subscriptions/acknowledged"]


async def test_a_stream_the_client_closes_stops_following_the_agent() -> None:
    wire, agent, listens = Wire(), Agent("a"), Listens()
    stream = asyncio.ensure_future(listens.serve(_listen_context(wire, "debug"), agent, _params()))
    await wire.wait_sent(1)
    stream.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await stream
    assert len(listens) == 0
    agent.notify(_job_done("job-2"))  # nobody follows it any more; nothing is written
    assert wire.methods == ["notifications/subscriptions/acknowledged"]


async def test_an_ask_is_taken_once_and_only_by_its_own_identity() -> None:
    pages = SecretPages(60)
    try:
        asks = PendingAsks(pages)
        a, b = Agent("agent-a"), Agent("agent-b")
        ask_id, page = await asks.open(a, SecretAsk(session_id="pty-1", prompt="pw: ", reason="r"))
        assert ask_id not in page.url and len(ask_id) >= 20
        assert asks.take(ask_id, b) is None  # another identity: not given, not spent
        taken = asks.take(ask_id, a)
        assert taken is not None and taken.page is page
        assert asks.take(ask_id, a) is None  # once
        assert asks.take("no-such-ask", a) is None
    finally:
        await pages.aclose()
