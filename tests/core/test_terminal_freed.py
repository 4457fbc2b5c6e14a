"""A closed terminal is freed by reference counting alone: nothing of it waits for a pass
of the cyclic garbage collector, whose passes over many dead terminals stall the loop."""

from __future__ import annotations

import weakref

import pytest

from dsh_terminal_core.provider import LocalTerminalProvider, TerminalSpawnSpec

from ..helpers import let_callbacks_run


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
        await let_callbacks_run()  # the close's callbacks let go of it
        assert ref() is None
