"""Cleanup awaited through ``finish_shielded`` runs to its end even when its caller is cancelled."""

from __future__ import annotations

import asyncio

import pytest

from dsh_terminal_core import finish_shielded


async def test_a_cancelled_caller_waits_for_the_work_then_is_cancelled() -> None:
    for _ in range(50):
        gate = asyncio.Event()
        finished: list[str] = []

        async def cleanup(gate: asyncio.Event = gate, finished: list[str] = finished) -> str:
            await gate.wait()
            finished.append("done")
            return "result"

        caller = asyncio.ensure_future(finish_shielded(cleanup()))
        await asyncio.sleep(0)
        caller.cancel()
        await asyncio.sleep(0)
        assert not caller.done()  # held back while the cleanup runs
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await caller
        assert finished == ["done"]


async def test_without_cancellation_the_result_and_the_failure_come_through() -> None:
    async def ok() -> int:
        return 7

    async def fails() -> None:
        raise ValueError("cleanup failed")

    assert await finish_shielded(ok()) == 7
    with pytest.raises(ValueError, match="cleanup failed"):
        await finish_shielded(fails())
