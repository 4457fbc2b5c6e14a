"""Opens take turns on the loop: one synchronous step per iteration, and a step never
shares an iteration with the step before it; an open cancelled between its build turns
leaves no child, no server child and no descriptor."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator

import psutil
import pytest

from dsh_terminal_core.kernel.turns import loop_turn, take_turn
from dsh_terminal_core.provider import LocalTerminalProvider, TerminalSpawnSpec, terminal
from dsh_terminal_core.provider.forkclient import fork_server

from ..helpers import live_children, until_true


async def test_steps_started_together_run_one_per_iteration() -> None:
    loop = asyncio.get_running_loop()
    busy = False
    overlaps = 0

    def next_iteration() -> None:
        nonlocal busy
        busy = False

    async def step() -> None:
        nonlocal busy, overlaps
        await take_turn()
        if busy:  # another step ran earlier in this same iteration
            overlaps += 1
        busy = True
        loop.call_soon(next_iteration)  # runs at the next iteration, not this one

    for _ in range(50):
        await asyncio.gather(*(step() for _ in range(16)))
    assert overlaps == 0


async def test_a_turn_starts_after_the_callers_previous_step_even_when_free() -> None:
    loop = asyncio.get_running_loop()
    for _ in range(50):
        previous_step_over = False

        def mark() -> None:
            nonlocal previous_step_over
            previous_step_over = True

        loop.call_soon(mark)  # runs once the iteration of this step has ended
        async with loop_turn():
            assert previous_step_over


async def test_a_waiter_cancelled_in_the_queue_does_not_stop_the_turns() -> None:
    for _ in range(50):
        waiters = [asyncio.ensure_future(take_turn()) for _ in range(4)]
        await asyncio.sleep(0)
        waiters[1].cancel()
        waiters[2].cancel()
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert [isinstance(r, asyncio.CancelledError) for r in results] == [
            False,
            True,
            True,
            False,
        ]
        await asyncio.wait_for(take_turn(), 5)  # the turn is still handed on


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux-only")
@pytest.mark.parametrize("held_turn", [2, 3], ids=["before-the-handle", "before-its-readers"])
async def test_an_open_cancelled_between_its_build_turns_leaves_nothing(
    held_turn: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """spawn_terminal's turns: 1 environment, 2 facts and handle, 3 readers start. The
    open is held (by an event, not a sleep) at the start of turn ``held_turn``, when the
    server has already handed over the child, and cancelled there."""
    provider = LocalTerminalProvider()
    spec = TerminalSpawnSpec(argv=["sleep", "100"])
    opened = await provider.spawn_terminal(spec)  # the server is running from here on
    await opened.terminate()
    server = psutil.Process(fork_server().pid or 0)
    real_turn = terminal.loop_turn
    for _ in range(50):
        reached = asyncio.Event()
        calls = 0

        @contextlib.asynccontextmanager
        async def held(reached: asyncio.Event = reached) -> AsyncIterator[None]:
            nonlocal calls
            calls += 1
            if calls == held_turn:
                reached.set()
                await asyncio.Event().wait()  # until cancelled
            async with real_turn():
                yield

        monkeypatch.setattr(terminal, "loop_turn", held)
        task = asyncio.ensure_future(provider.spawn_terminal(spec))
        await asyncio.wait_for(reached.wait(), 10)
        assert len(live_children(server)) == 1  # handed over, not yet a handle
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        monkeypatch.setattr(terminal, "loop_turn", real_turn)
        assert await until_true(lambda: live_children(server) == set()), server.children()
