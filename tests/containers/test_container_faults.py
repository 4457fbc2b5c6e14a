"""Faults with a real container runtime, each while a send is in flight (SPEC §29 item 2).

The world is the workload image's daemon, reached through the exec relay (``podman exec
-i ... world --stdio --socket``), with ``heartbeat_s`` short so a frozen container is
found in seconds, and ``state`` asking podman what became of the container. Every send
settles — with its own outcome, or ``session_exit`` and a reason naming what happened —
within the heartbeat bound, never after its whole budget (60 s here).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import attrs
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


@attrs.frozen
class _World:
    """A harness whose default world ``box`` is the container ``name``, and its agent."""

    name: str
    h: Harness
    agent: Agent

    async def open(self) -> str:
        spawned = await self.h.ctx.terminals.spawn(self.agent, SpawnRequest(type="shell"))
        sid: str = spawned.session_id
        return sid

    async def in_flight(self, sid: str, text: str) -> Any:
        """A send the world's shell has read (its echo is back): the fault may come now."""
        terminals = self.h.ctx.terminals
        op = terminals.start_send(self.agent, sid, SendRequest(text=text, timeout_ms=BUDGET_MS))
        first = text.split()[0]
        while first not in terminals.read(self.agent, sid, ReadRequest(offset=1)).text:
            await asyncio.sleep(0.01)
        return op

    async def answers(self, sid: str, word: str = "alive") -> None:
        """``sid``'s shell still runs a command: ``echo word`` settles at the prompt."""
        send = SendRequest(text=f"echo {word}")
        done = await self.h.ctx.terminals.start_send(self.agent, sid, send).done
        assert done.wait_reason is WaitReason.STDIN_READ and done.viewport.strip() == word

    async def gone_saying(self, sid: str, op: Any, *words: str) -> None:
        """The send settles ``session_exit`` within the bound; the session reads gone and
        a later send is refused with the reason, which names what happened."""
        started = time.monotonic()
        result = await asyncio.wait_for(op.done, BOUND_S + 5)
        assert time.monotonic() - started < BOUND_S
        assert result.wait_reason is WaitReason.SESSION_EXIT
        [row] = self.h.ctx.terminals.list(self.agent)
        assert row.status.kind == "exited"
        with pytest.raises(TerminalError) as refused:
            self.h.ctx.terminals.start_send(self.agent, sid, SendRequest(text="echo again"))
        assert refused.value.code == "SESSION_EXITED"
        assert "world 'box'" in refused.value.message
        for said in words:
            assert said in refused.value.message, refused.value.message


@contextlib.contextmanager
def _daemon(images: Images, *options: str) -> Iterator[str]:
    """A workload container (``options`` for ``podman run``) whose daemon listens."""
    with container(images.workload, *options) as name:
        wait_for_daemon(name)
        yield name


@contextlib.asynccontextmanager
async def _harness(name: str) -> AsyncIterator[_World]:
    """A harness on the daemon in ``name``, with one agent, disposed when the test is done."""
    async with Harness(config=_config(name)) as h:
        world = _World(name, h, h.create_agent("agent-1"))
        yield world
        await world.agent.dispose()


@contextlib.asynccontextmanager
async def _world(images: Images, *options: str) -> AsyncIterator[_World]:
    """:func:`_harness` on a :func:`_daemon`: the container removed at the end."""
    with _daemon(images, *options) as name:
        async with _harness(name) as world:
            yield world


async def test_a_stopped_container_settles_the_send_saying_the_daemon_stopped(
    images: Images,
) -> None:
    async with _world(images) as w:
        sid = await w.open()
        op = await w.in_flight(sid, "sleep 30")
        stopping = asyncio.create_task(asyncio.to_thread(podman, "stop", "-t", "20", w.name))
        await w.gone_saying(sid, op, "stopping (SIGTERM)")
        await stopping
        # The daemon closed its sessions, then exited 0.
        assert podman("inspect", "--format", "{{.State.ExitCode}}", w.name) == "0"


async def test_a_killed_container_settles_the_send_naming_its_state(images: Images) -> None:
    async with _world(images) as w:
        sid = await w.open()
        op = await w.in_flight(sid, "sleep 30")
        await asyncio.to_thread(podman, "kill", w.name)
        await w.gone_saying(sid, op, "daemon is gone", "exit=137")
        # The next open says why it cannot, naming the world.
        with pytest.raises(TerminalError) as refused:
            await w.open()
        assert refused.value.code == "WORLD_UNAVAILABLE" and "'box'" in refused.value.message


async def test_a_paused_container_is_found_by_the_heartbeat_and_named(images: Images) -> None:
    with _daemon(images) as name:
        try:
            async with _harness(name) as w:
                sid = await w.open()
                op = await w.in_flight(sid, "sleep 30")
                await asyncio.to_thread(podman, "pause", name)
                await w.gone_saying(sid, op, "paused")
        finally:
            podman("unpause", name, check=False)


async def test_a_restarted_container_reports_its_sessions_gone_and_opens_afresh(
    images: Images,
) -> None:
    async with _world(images) as w:
        sid = await w.open()
        first = w.h.ctx.worlds.world_id("box")
        op = await w.in_flight(sid, "sleep 30")
        restarting = asyncio.create_task(asyncio.to_thread(podman, "restart", "-t", "20", w.name))
        await w.gone_saying(sid, op, "stopping (SIGTERM)")
        await restarting
        wait_for_daemon(w.name, starts=2)  # the new daemon's, not the first one's line
        # A new daemon, a new worldId: a fresh session, never the old one replaced.
        fresh = await w.open()
        assert fresh != sid and w.h.ctx.worlds.world_id("box") != first
        await w.answers(fresh, "up")


#: Touches every page it takes (bytes filled, not calloc'ed zeros), until the OOM killer.
_HOG = "python3 -c 'x = [b\"x\" * (1 << 20) for _ in iter(int, 1)]'"
#: Forks children that sleep until fork fails (EAGAIN at the pids limit), then exits 1.
_FORKS = (
    "python3 -c 'import os, time; "
    "[os.fork() == 0 and (time.sleep(60), os._exit(0)) for _ in iter(int, 1)]'"
)


async def _at_a_limit(w: _World, command: str) -> tuple[str, str, Any]:
    """A quiet session beside one running ``command`` until it settles:
    ``(quiet, the other, its result)``."""
    quiet = await w.open()
    sid = await w.open()
    op = await w.in_flight(sid, command)
    return quiet, sid, await asyncio.wait_for(op.done, BOUND_S + 30)


async def test_an_oom_kill_under_memory_settles_the_send_and_the_world_lives(
    images: Images,
) -> None:
    async with _world(images, "--memory", "128m", "--memory-swap", "128m") as w:
        quiet, sid, result = await _at_a_limit(w, _HOG)
        # Its own outcome: the kernel's OOM killer took the hog (SIGKILL, 137).
        assert result.wait_reason is WaitReason.STDIN_READ and result.exit_code == 137
        for session in (sid, quiet):
            await w.answers(session)


async def test_the_pids_limit_hit_settles_the_send_and_the_world_lives(images: Images) -> None:
    async with _world(images, "--pids-limit", "64") as w:
        quiet, _, result = await _at_a_limit(w, _FORKS)
        # Its own outcome: fork refused (EAGAIN) at the limit, the program's exit 1.
        assert result.wait_reason is WaitReason.STDIN_READ and result.exit_code == 1
        assert "Resource temporarily unavailable" in result.viewport
        # The world still answers at the limit (a builtin needs no fork; the readiness
        # ladder reads /proc and forks nothing).
        await w.answers(quiet)
