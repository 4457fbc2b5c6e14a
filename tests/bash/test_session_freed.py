"""A closed shell session is freed by reference counting alone, after a send and after
the shell's own exit: nothing of it waits for a pass of the cyclic garbage collector."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from dsh_terminal_core.terminals import WaitReason

from ..helpers import harness, open_shell, send


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("ending", ["close", "exit"])
async def test_a_closed_session_is_freed_without_the_collector(ending: str) -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        for _ in range(10):
            sid = await open_shell(h, agent)
            assert (await send(h, agent, sid, "echo hi")).wait_reason is WaitReason.STDIN_READ
            session = h.ctx.terminals.get_session(agent, sid)
            refs = [weakref.ref(session), weakref.ref(session._process)]
            del session
            if ending == "exit":
                result = await send(h, agent, sid, "exit")
                assert result.wait_reason is WaitReason.SESSION_EXIT
            await h.ctx.terminals.kill(agent, sid, "done")
            for _ in range(5):  # callbacks the close scheduled let go of it
                await asyncio.sleep(0)
            assert [ref() for ref in refs] == [None, None]
