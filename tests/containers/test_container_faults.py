"""Faults with a real container runtime, each while a send is in flight (SPEC §29 item 2).

The world is the workload image's daemon, reached through the exec relay (``podman exec
-i ... world --stdio --socket``), with ``heartbeat_s`` short so a frozen container is
found in seconds, and ``state`` asking podman what became of the container. Every send
settles — with its own outcome, or ``session_exit`` and a reason naming what happened —
within the heartbeat bound, never after its whole budget (60 s here).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest, WaitReason

from .podman import Images, container, exec_world, podman, state_command, wait_for_daemon

pytestmark = pytest.mark.podman

HEARTBEAT_S = 1.0
#: Three silent heartbeats find a frozen peer; the fourth is the check's own granularity;
#: then one `podman exec` to learn the container is not running, and `podman inspect`.
BOUND_S = 4 * HEARTBEAT_S + 15
BUDGET_MS = 60_000


def _config(name: str, **extra: Any) -> dict[str, Any]:
    entry = exec_world(
        name,
        f"key-{uuid.uuid4().hex}",
        heartbeat_s=HEARTBEAT_S,
        state=state_command(name),
        **extra,
    )
    return {"worlds": {"worlds": {"box": entry}, "default": "box"}}


async def _open(h: Harness, agent: Agent) -> str:
    return (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))).session_id


async def _in_flight(h: Harness, agent: Agent, sid: str, text: str) -> Any:
    """A send the world's shell has read (its echo is back): the fault may come now."""
    op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=text, timeout_ms=BUDGET_MS))
    first = text.split()[0]
    while first not in h.ctx.terminals.read(agent, sid, ReadRequest(offset=1)).text:
        await asyncio.sleep(0.01)
    return op


async def _gone_saying(h: Harness, agent: Agent, sid: str, op: Any, *words: str) -> None:
    """The send settles ``session_exit`` within the bound; the session reads gone and a
    later send is refused with the reason, which names what happened."""
    started = time.monotonic()
    result = await asyncio.wait_for(op.done, BOUND_S + 5)
    assert time.monotonic() - started < BOUND_S
    assert result.wait_reason is WaitReason.SESSION_EXIT
    [row] = h.ctx.terminals.list(agent)
    assert row.status.kind == "exited"
    with pytest.raises(TerminalError) as refused:
        h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo again"))
    assert refused.value.code == "SESSION_EXITED"
    assert "world 'box'" in refused.value.message
    for said in words:
        assert said in refused.value.message, refused.value.message


async def test_a_stopped_container_settles_the_send_saying_the_daemon_stopped(
    images: Images,
) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        async with Harness(config=_config(name)) as h:
            agent = h.create_agent("agent-1")
            sid = await _open(h, agent)
            op = await _in_flight(h, agent, sid, "sleep 30")
            stopping = asyncio.create_task(asyncio.to_thread(podman, "stop", "-t", "20", name))
            await _gone_saying(h, agent, sid, op, "stopping (SIGTERM)")
            await stopping
            await agent.dispose()
        # The daemon closed its sessions, then exited 0.
        assert podman("inspect", "--format", "{{.State.ExitCode}}", name) == "0"


async def test_a_killed_container_settles_the_send_naming_its_state(images: Images) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        async with Harness(config=_config(name)) as h:
            agent = h.create_agent("agent-1")
            sid = await _open(h, agent)
            op = await _in_flight(h, agent, sid, "sleep 30")
            await asyncio.to_thread(podman, "kill", name)
            await _gone_saying(h, agent, sid, op, "daemon is gone", "exit=137")
            # The next open says why it cannot, naming the world.
            with pytest.raises(TerminalError) as refused:
                await _open(h, agent)
            assert refused.value.code == "WORLD_UNAVAILABLE" and "'box'" in refused.value.message
            await agent.dispose()


async def test_a_paused_container_is_found_by_the_heartbeat_and_named(images: Images) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        try:
            async with Harness(config=_config(name)) as h:
                agent = h.create_agent("agent-1")
                sid = await _open(h, agent)
                op = await _in_flight(h, agent, sid, "sleep 30")
                await asyncio.to_thread(podman, "pause", name)
                await _gone_saying(h, agent, sid, op, "paused")
                await agent.dispose()
        finally:
            podman("unpause", name, check=False)


async def test_a_restarted_container_reports_its_sessions_gone_and_opens_afresh(
    images: Images,
) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        async with Harness(config=_config(name)) as h:
            agent = h.create_agent("agent-1")
            sid = await _open(h, agent)
            first = h.ctx.worlds.world_id("box")
            op = await _in_flight(h, agent, sid, "sleep 30")
            restarting = asyncio.create_task(
                asyncio.to_thread(podman, "restart", "-t", "20", name)
            )
            await _gone_saying(h, agent, sid, op, "stopping (SIGTERM)")
            await restarting
            wait_for_daemon(name, starts=2)  # the new daemon's, not the first one's line
            # A new daemon, a new worldId: a fresh session, never the old one replaced.
            fresh = await _open(h, agent)
            assert fresh != sid and h.ctx.worlds.world_id("box") != first
            done = await h.ctx.terminals.start_send(agent, fresh, SendRequest(text="echo up")).done
            assert done.wait_reason is WaitReason.STDIN_READ and done.viewport.strip() == "up"
            await agent.dispose()


#: Touches every page it takes (bytes filled, not calloc'ed zeros), until the OOM killer.
_HOG = "python3 -c 'x = [b\"x\" * (1 << 20) for _ in iter(int, 1)]'"
#: Forks children that sleep until fork fails (EAGAIN at the pids limit), then exits 1.
_FORKS = (
    "python3 -c 'import os, time; "
    "[os.fork() == 0 and (time.sleep(60), os._exit(0)) for _ in iter(int, 1)]'"
)


async def test_an_oom_kill_under_memory_settles_the_send_and_the_world_lives(
    images: Images,
) -> None:
    with container(images.workload, "--memory", "128m", "--memory-swap", "128m") as name:
        wait_for_daemon(name)
        async with Harness(config=_config(name)) as h:
            agent = h.create_agent("agent-1")
            quiet = await _open(h, agent)
            sid = await _open(h, agent)
            op = await _in_flight(h, agent, sid, _HOG)
            result = await asyncio.wait_for(op.done, BOUND_S + 30)
            # Its own outcome: the kernel's OOM killer took the hog (SIGKILL, 137).
            assert result.wait_reason is WaitReason.STDIN_READ and result.exit_code == 137
            for session in (sid, quiet):
                done = await h.ctx.terminals.start_send(
                    agent, session, SendRequest(text="echo alive")
                ).done
                assert done.viewport.strip() == "alive"
            await agent.dispose()


async def test_the_pids_limit_hit_settles_the_send_and_the_world_lives(images: Images) -> None:
    with container(images.workload, "--pids-limit", "64") as name:
        wait_for_daemon(name)
        async with Harness(config=_config(name)) as h:
            agent = h.create_agent("agent-1")
            quiet = await _open(h, agent)
            sid = await _open(h, agent)
            op = await _in_flight(h, agent, sid, _FORKS)
            result = await asyncio.wait_for(op.done, BOUND_S + 30)
            # Its own outcome: fork refused (EAGAIN) at the limit, the program's exit 1.
            assert result.wait_reason is WaitReason.STDIN_READ and result.exit_code == 1
            assert "Resource temporarily unavailable" in result.viewport
            # The world still answers at the limit (a builtin needs no fork; the readiness
            # ladder reads /proc and forks nothing).
            done = await h.ctx.terminals.start_send(
                agent, quiet, SendRequest(text="echo alive")
            ).done
            assert done.wait_reason is WaitReason.STDIN_READ and done.viewport.strip() == "alive"
            await agent.dispose()
