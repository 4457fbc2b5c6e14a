"""Waking MCP clients, in process: the notice mapping, and one connection's subscription.

The subscription runs on the SDK's own ``Connection`` and ``ServerSession`` with a
recording outbound channel in place of a transport, so what is tested is what the SDK
would write to the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp_types.version import LATEST_MODERN_VERSION

from dsh_terminal_core.kernel.agents import Agent, Notice
from dsh_terminal_core.mcp.notify import EVENTS, delivered_at, notification_data
from dsh_terminal_core.mcp.wake import QUEUE_BOUND, attach

HANDSHAKE_ERA = "2025-11-25"


class Wire:
    """An SDK ``Outbound`` that records notifications; ``gate`` holds them while cleared."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.arrived = asyncio.Event()
        self.entered = asyncio.Event()
        self.fail = False

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        self.entered.set()
        await self.gate.wait()
        if self.fail:
            raise ConnectionResetError("the client is gone")
        self.sent.append((method, dict(params or {})))
        self.arrived.set()

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        raise AssertionError("no requests expected")

    async def wait_sent(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        async def wait() -> None:
            while len(self.sent) < count:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), 5)
        return self.sent


def _context(
    wire: Wire, version: str = HANDSHAKE_ERA
) -> tuple[ServerRequestContext[Any], Connection]:
    connection = Connection.for_loop(wire, protocol_version_hint=version)
    session = ServerSession(wire, connection)  # type: ignore[arg-type]
    ctx: ServerRequestContext[Any] = ServerRequestContext(
        session=session,
        lifespan_context={},
        protocol_version=version,
        method="notifications/initialized",
    )
    return ctx, connection


def _job_done(job: str, session_id: str | None = "pty-1") -> Notice:
    data: dict[str, object] = {"jobId": job, "status": "completed"}
    if session_id is not None:
        data["sessionId"] = session_id
    return Notice(kind="job_finished", text=f"background job {job} completed", data=data)


# -- the mapping -----------------------------------------------------------------------


def test_each_announced_kind_maps_to_its_event_and_others_are_not_sent() -> None:
    assert dict(EVENTS) == {
        "job_finished": "job_done",
        "matched": "matched",
        "human_control": "human_control",
        "human_returned": "human_returned",
        "message": "message",
        "limit_reached": "limit_reached",
    }
    said = Notice(kind="message", text="step 2 of 3")  # a plugin's own word for the client
    assert notification_data(said) == {
        "event": "message",
        "sessionId": None,
        "summary": "step 2 of 3",
    }
    assert notification_data(_job_done("job-3")) == {
        "event": "job_done",
        "sessionId": "pty-1",
        "jobId": "job-3",
        "summary": "background job job-3 completed",
    }
    matched = Notice(kind="matched", text="m", data={"sessionId": "pty-2", "jobId": "job-4"})
    assert notification_data(matched) == {
        "event": "matched",
        "sessionId": "pty-2",
        "jobId": "job-4",
        "summary": "m",
    }
    human = Notice(kind="human_control", text="a person took pty-2", data={"sessionId": "pty-2"})
    assert notification_data(human) == {
        "event": "human_control",
        "sessionId": "pty-2",
        "summary": "a person took pty-2",
    }
    assert notification_data(_job_done("job-5", session_id=None))["sessionId"] is None  # type: ignore[index]
    assert notification_data(Notice(kind="something_else", text="x")) is None


def test_info_reaches_clients_that_set_no_level_or_info_or_below() -> None:
    for level in (None, "debug", "info", "bogus"):
        assert delivered_at(level), level
    for level in ("notice", "warning", "error", "critical", "alert", "emergency"):
        assert not delivered_at(level), level


# -- one connection's subscription -----------------------------------------------------


async def test_an_announced_notice_becomes_an_info_log_message_on_the_standalone_stream() -> None:
    wire, agent = Wire(), Agent("a")
    ctx, connection = _context(wire)
    client = attach(ctx, agent)
    assert client is not None and attach(ctx, agent) is client  # idempotent
    agent.notify(Notice(kind="unannounced", text="not sent"))
    agent.notify(_job_done("job-1"))
    [(method, params)] = await wire.wait_sent(1)
    assert method == "notifications/message"
    assert params == {
        "level": "info",
        "logger": "dsh-terminal",
        "data": notification_data(_job_done("job-1")),
    }
    # Both notices are still queued for the next turn.
    assert [n.kind for n in agent.drain_notices()] == ["unannounced", "job_finished"]
    await connection.exit_stack.aclose()


async def test_the_level_at_the_event_decides() -> None:
    wire, agent = Wire(), Agent("a")
    ctx, connection = _context(wire)
    client = attach(ctx, agent)
    assert client is not None
    client.level = "warning"
    agent.notify(_job_done("job-1"))
    client.level = "info"
    agent.notify(_job_done("job-2"))
    sent = await wire.wait_sent(1)
    assert [params["data"]["jobId"] for _, params in sent] == ["job-2"]
    await connection.exit_stack.aclose()


async def test_the_connection_ending_unsubscribes_it() -> None:
    wire, agent = Wire(), Agent("a")
    ctx, connection = _context(wire)
    client = attach(ctx, agent)
    assert client is not None
    await connection.exit_stack.aclose()  # what the SDK does however a connection ends
    assert client.closed and agent._listeners == []


async def test_a_client_that_does_not_read_keeps_only_the_newest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    wire, agent = Wire(), Agent("a")
    ctx, connection = _context(wire)
    attach(ctx, agent)
    wire.gate.clear()
    agent.notify(_job_done("job-0"))
    await asyncio.wait_for(wire.entered.wait(), 5)  # the sender took job-0 and is held
    total = QUEUE_BOUND + 10
    for n in range(1, total + 1):
        agent.notify(_job_done(f"job-{n}"))  # never blocks the notifier
    wire.gate.set()
    sent = await wire.wait_sent(1 + QUEUE_BOUND)
    jobs = [params["data"]["jobId"] for _, params in sent]
    assert jobs == ["job-0", *(f"job-{n}" for n in range(total - QUEUE_BOUND + 1, total + 1))]
    assert "not reading" in caplog.text
    await connection.exit_stack.aclose()


async def test_a_connection_that_cannot_be_written_to_is_dropped_quietly() -> None:
    wire, agent = Wire(), Agent("a")
    ctx, connection = _context(wire)
    client = attach(ctx, agent)
    assert client is not None
    wire.fail = True
    agent.notify(_job_done("job-1"))
    await asyncio.wait_for(_until(lambda: client.closed), 5)
    assert agent._listeners == []
    assert [n.data["jobId"] for n in agent.drain_notices()] == ["job-1"]
    await connection.exit_stack.aclose()


async def test_a_connection_follows_its_identitys_new_agent() -> None:
    wire, old, new = Wire(), Agent("a"), Agent("a")
    ctx, connection = _context(wire)
    attach(ctx, old)
    attach(ctx, new)  # a call after the identity was reaped and made anew
    old.notify(_job_done("job-1"))
    new.notify(_job_done("job-2"))
    sent = await wire.wait_sent(1)
    assert [params["data"]["jobId"] for _, params in sent] == ["job-2"]
    assert old._listeners == []
    await connection.exit_stack.aclose()


async def test_the_2026_era_is_not_subscribed() -> None:
    wire, agent = Wire(), Agent("a")
    ctx, _connection = _context(wire, LATEST_MODERN_VERSION)
    assert attach(ctx, agent) is None
    assert agent._listeners == []


async def _until(check: Any) -> None:
    while not check():
        await asyncio.sleep(0)
