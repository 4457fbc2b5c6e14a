"""A closed terminal is freed by reference counting alone: nothing of it waits for a pass
of the cyclic garbage collector, whose passes over many dead terminals stall the loop."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from dsh_terminal_core.provider import LocalTerminalProvider, TerminalSpawnSpec


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _settle() -> None:
    for _ in range(5):  # callbacks the close scheduled let go of it
        await asyncio.sleep(0)


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("ending", ["terminate", "exit"])
async def test_a_closed_terminal_is_freed_without_the_collector(ending: str) -> None:
    provider = LocalTerminalProvider()
    for _ in range(20):
        argv = ["bash", "--noprofile", "--norc", "-i"] if ending == "terminate" else ["true"]
        process = await provider.spawn_terminal(TerminalSpawnSpec(argv=argv, env={"PS1": "$ "}))
        ref = weakref.ref(process)
        process.set_output_handler(lambda _chunk: None)
        if ending == "exit":
            await process.done
        await process.terminate()
        del process
        await _settle()
        assert ref() is None
