"""Agents: identity ownership, dispose order, idempotence, aggregated failures."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_core.kernel.agents import Agent, Notice
from dsh_terminal_core.kernel.errors import DisposeError


def test_identity_is_the_object_not_the_id() -> None:
    a, b = Agent("same"), Agent("same")
    assert a != b and a is not b
    assert len({a, b}) == 2


async def test_dispose_runs_effects_newest_first_and_awaits_them() -> None:
    order: list[str] = []
    agent = Agent("a")

    async def slow() -> None:
        await asyncio.sleep(0.01)
        order.append("async")

    agent.on_dispose(lambda: order.append("first"))
    agent.on_dispose(slow)
    agent.on_dispose(lambda: order.append("last"))
    assert agent.live
    await agent.dispose()
    assert order == ["last", "async", "first"]
    assert not agent.live and agent.disposed


async def test_dispose_twice_runs_nothing_again() -> None:
    calls: list[int] = []
    agent = Agent("a")
    agent.on_dispose(lambda: calls.append(1))
    await asyncio.gather(agent.dispose(), agent.dispose())
    await agent.dispose()
    assert calls == [1]


async def test_failures_are_aggregated_and_every_effect_still_runs() -> None:
    ran: list[str] = []
    agent = Agent("a")

    def boom(label: str) -> None:
        ran.append(label)
        raise RuntimeError(label)

    agent.on_dispose(lambda: boom("one"))
    agent.on_dispose(lambda: ran.append("middle"))
    agent.on_dispose(lambda: boom("two"))
    with pytest.raises(DisposeError) as info:
        await agent.dispose()
    assert ran == ["two", "middle", "one"]
    assert [str(e) for e in info.value.errors] == ["two", "one"]
    assert "RuntimeError: two; RuntimeError: one" in str(info.value)


async def test_removed_effect_does_not_run_and_late_effects_are_refused() -> None:
    ran: list[str] = []
    agent = Agent("a")
    remove = agent.on_dispose(lambda: ran.append("removed"))
    remove()
    await agent.dispose()
    assert ran == []
    with pytest.raises(RuntimeError, match="disposed"):
        agent.on_dispose(lambda: None)


async def test_late_effects_run_after_every_ordinary_effect() -> None:
    agent = Agent("a")
    order: list[str] = []
    agent.on_dispose(lambda: order.append("late-1"), late=True)
    agent.on_dispose(lambda: order.append("first"))
    remove = agent.on_dispose(lambda: order.append("removed"), late=True)
    agent.on_dispose(lambda: order.append("late-2"), late=True)

    async def slow() -> None:
        await asyncio.sleep(0)
        order.append("second")

    agent.on_dispose(slow)
    remove()
    await agent.dispose()
    assert order == ["second", "first", "late-2", "late-1"]
    with pytest.raises(RuntimeError):
        agent.on_dispose(lambda: None, late=True)


def test_notices_queue_and_drain() -> None:
    agent = Agent("a")
    agent.notify(Notice(kind="k", text="one"))
    agent.notify(Notice(kind="k", text="two"))
    assert [n.text for n in agent.drain_notices()] == ["one", "two"]
    assert agent.drain_notices() == []


def test_listeners_hear_each_notice_after_it_is_queued_and_a_failing_one_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent("a")
    heard: list[tuple[str, str, int]] = []

    def broken(_notice: Notice) -> None:
        raise RuntimeError("listener broke")

    def first(notice: Notice) -> None:
        # Queued before any listener runs, so a woken client's next call finds it.
        heard.append(("first", notice.text, len(agent._notices)))

    remove_broken = agent.on_notice(broken)
    remove_first = agent.on_notice(first)
    remove_second = agent.on_notice(lambda notice: heard.append(("second", notice.text, 0)))
    agent.notify(Notice(kind="k", text="one"))
    assert heard == [("first", "one", 1), ("second", "one", 0)]
    assert "listener broke" in caplog.text
    remove_broken()
    remove_first()
    remove_first()  # harmless twice
    agent.notify(Notice(kind="k", text="two"))
    assert heard[2:] == [("second", "two", 0)]
    assert [n.text for n in agent.drain_notices()] == ["one", "two"]
    remove_second()
    agent.notify(Notice(kind="k", text="three"))
    assert len(heard) == 3


def test_a_second_remover_call_leaves_the_same_listener_added_again() -> None:
    agent = Agent("a")
    heard: list[str] = []

    def listener(notice: Notice) -> None:
        heard.append(notice.text)

    remove_once = agent.on_notice(listener)
    agent.on_notice(listener)
    remove_once()
    remove_once()
    agent.notify(Notice(kind="k", text="one"))
    assert heard == ["one"]
