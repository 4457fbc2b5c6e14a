"""Owner and harness lifecycle with real shells: nothing is published late, nothing survives."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psutil
import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.registry import SendRequest, SpawnRequest, WaitReason

from ..helpers import full_access, harness, open_shell


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.Error:
            continue
    return alive


async def test_owner_disposed_during_spawn_publishes_nothing(tmp_path: Path) -> None:
    # A startup file that takes a while keeps the spawn in flight for as long as we need.
    rcfile = tmp_path / "slow.rc"
    rcfile.write_text("sleep 2\n")
    bash = {"shell_args": ["--noprofile", "--rcfile", str(rcfile), "-i"]}
    async with harness(full_access(**{"terminal-bash": bash})) as h:
        agent = h.create_agent("a")
        spawn = asyncio.ensure_future(h.ctx.terminals.spawn(agent, SpawnRequest(type="shell")))
        await asyncio.sleep(0.2)  # the shell is starting, its first prompt not yet seen
        assert not spawn.done()
        assert h.ctx.terminals.has_owner_activity(agent)
        await agent.dispose()
        with pytest.raises(TerminalError) as info:
            await spawn
        assert info.value.code == "OWNER_NOT_LIVE"
        assert h.ctx.terminals.list(agent) == []
        assert not h.ctx.terminals.has_owner_activity(agent)


async def test_owner_dispose_closes_sessions_with_sends_in_flight() -> None:
    async with harness() as h:
        agent = h.create_agent("a")
        sids = [await open_shell(h, agent) for _ in range(3)]
        pids = [h.ctx.terminals.get_session(agent, sid).pid for sid in sids]
        ops = [
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 1000")) for sid in sids
        ]
        await asyncio.sleep(0.2)
        await agent.dispose()
        results = await asyncio.gather(*(op.done for op in ops))
        assert {r.wait_reason for r in results} == {WaitReason.SESSION_EXIT}
        assert _alive(pids) == []
        with pytest.raises(TerminalError) as info:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        assert info.value.code == "OWNER_NOT_LIVE"


async def test_harness_shutdown_with_live_sessions_leaves_no_process() -> None:
    pids: list[int] = []
    async with harness() as h:
        for name in ("one", "two"):
            agent = h.create_agent(name)
            sid = await open_shell(h, agent)
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 1000 & sleep 1000"))
            pids.append(h.ctx.terminals.get_session(agent, sid).pid)
        await asyncio.sleep(0.2)
        children = [c.pid for p in pids for c in psutil.Process(p).children(recursive=True)]
        assert children, "the sleeps should be running"
    assert _alive(pids + children) == []
