"""``ctx.pty`` called directly, as a consumer plugin does: rollback, capability, lifecycle."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import types
import weakref
from typing import Any

import psutil
import pytest

from dsh_pty_session import PtySessionService
from dsh_pty_session import plugin as pty_plugin
from dsh_terminal_bash import plugin as bash_plugin
from dsh_terminal_core.kernel import jobs_plugin as jobs
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import (
    DshError,
    OperationCancelled,
    PluginLoadError,
    TerminalError,
)
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.hookspecs import hookimpl
from dsh_terminal_core.kernel.plugins import PluginInfo
from dsh_terminal_core.provider import plugin as subprocess_local
from dsh_terminal_core.registry import SpawnRequest
from dsh_terminal_core.registry import plugin as terminals
from dsh_terminal_core.sandbox import (
    bwrap_plugin as sandbox_bwrap,
)
from dsh_terminal_core.sandbox import (
    policy_plugin as sandbox_policy,
)
from dsh_terminal_core.testing import FakeBackend

from ..helpers import full_access
from .fake_registry import FakeRegistry, fake_registry

CORE = [subprocess_local, terminals, sandbox_policy, sandbox_bwrap, jobs]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def pty_consumer(seen: list[Any]) -> types.ModuleType:
    """A third-party plugin that injects ``pty`` and touches it only when called."""
    module = types.ModuleType("pty_consumer")

    @hookimpl
    def dsh_plugin_info() -> PluginInfo:
        return PluginInfo(name="pty-consumer", inject=("pty",))

    @hookimpl
    def dsh_apply(ctx: Any, config: object) -> None:
        seen.append(ctx)

    module.dsh_plugin_info = dsh_plugin_info  # type: ignore[attr-defined]
    module.dsh_apply = dsh_apply  # type: ignore[attr-defined]
    return module


async def test_a_plugin_injecting_pty_fails_startup_clearly_without_pty_session() -> None:
    harness = Harness(plugins=[*CORE, bash_plugin, pty_consumer([])], config=full_access())
    with pytest.raises(PluginLoadError) as caught:
        await harness.start()
    message = str(caught.value)
    assert "plugin 'pty-consumer' injects 'pty' but no loaded plugin provides it" in message
    assert "dsh-pty-session" in message
    assert caught.value.plugin == "pty-consumer"


async def test_the_same_plugin_starts_and_drives_pty_when_pty_session_is_loaded() -> None:
    seen: list[Any] = []
    plugins = [*CORE, bash_plugin, pty_plugin, pty_consumer(seen)]
    async with Harness(plugins=plugins, config=full_access()) as h:
        assert [p.name for p in h.plugins][-1] == "pty-consumer"  # ordered after its provider
        ctx = seen[0]
        agent = h.create_agent("consumer")
        opened = await ctx.pty.open(agent, {"command": "echo from-plugin"})
        assert "from-plugin" in opened.initial_output
        assert await ctx.pty.close(agent, opened.session_id) is True
        assert "pty_open" in [s["name"] for s in h.tool_schemas()]
        assert "terminal_open" not in [s["name"] for s in h.tool_schemas()]


async def test_tail_on_a_backend_without_line_cursor_is_unsupported() -> None:
    async with Harness(config=full_access()) as h:
        registry = FakeRegistry(FakeBackend("shell"))
        with h.ctx.override("terminals", registry):
            agent = h.create_agent("a")
            spawned = await registry.spawn(agent, SpawnRequest(type="shell"))
            with pytest.raises(TerminalError) as caught:
                h.ctx.pty.tail(agent, spawned.session_id)
            assert caught.value.code == "UNSUPPORTED"
            assert "complete_lines_since" in str(caught.value)
            result = await h.call_tool(agent, "pty_tail", {"id": spawned.session_id})
            assert result.is_error and result.text.startswith("error [UNSUPPORTED]")
            await registry.close_all()


async def test_open_rolls_back_when_the_caller_cancels_during_the_command() -> None:
    async with Harness(config=full_access()) as h, fake_registry(h) as registry:
        agent = h.create_agent("a")
        cancel = Cancellation()
        opening = asyncio.ensure_future(h.ctx.pty.open(agent, {"command": "sleep 30"}, cancel))
        while not registry.sessions:
            await asyncio.sleep(0.01)
        pid = next(iter(registry.live_pids()))
        await asyncio.sleep(0.2)
        reason = OperationCancelled("the user pressed stop")
        cancel.cancel(reason)
        with pytest.raises(OperationCancelled) as caught:
            await asyncio.wait_for(opening, 10)
        assert caught.value is reason
        assert registry.sessions == {} and len(registry.closed) == 1
        assert gone(pid)
        assert h.ctx.pty.opened_sessions(agent) == []


async def test_open_rolls_back_when_its_task_is_cancelled() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opening = asyncio.ensure_future(h.ctx.pty.open(agent, {"command": "sleep 30"}))
        while not h.ctx.terminals.list(agent):
            await asyncio.sleep(0.01)
        pid = h.ctx.terminals.list(agent)[0].pid
        await asyncio.sleep(0.2)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        assert h.ctx.terminals.list(agent) == []
        assert gone(pid)


async def test_open_rolls_back_when_a_send_is_refused() -> None:
    class RefusingRegistry(FakeRegistry):
        def start_send(self, owner: Agent, session_id: str, request: Any) -> Any:
            raise TerminalError("refused on purpose", "SEND_ACTIVE")

    async with Harness(config=full_access()) as h:
        registry = RefusingRegistry(fake_backend(h))
        with h.ctx.override("terminals", registry):
            agent = h.create_agent("a")
            with pytest.raises(TerminalError) as caught:
                await h.ctx.pty.open(agent, {"command": "echo never"})
            assert caught.value.code == "SEND_ACTIVE"
            assert registry.sessions == {} and len(registry.closed) == 1


def fake_backend(h: Harness) -> Any:
    from dsh_terminal_bash import BashBackend, BashConfig

    return BashBackend(h.ctx.subprocess, None, None, BashConfig())


async def test_dispose_during_an_open_closes_the_new_session() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        pty: PtySessionService = h.ctx.pty
        opening = asyncio.ensure_future(pty.open(agent, {"command": "sleep 30"}))
        while not h.ctx.terminals.list(agent):
            await asyncio.sleep(0.01)
        pid = h.ctx.terminals.list(agent)[0].pid
        await asyncio.sleep(0.2)
        await pty.dispose()
        with pytest.raises(TerminalError) as caught:
            await asyncio.wait_for(opening, 10)
        assert caught.value.code == "SERVICE_DISPOSING"
        assert h.ctx.terminals.list(agent) == []
        assert gone(pid)


async def test_open_validates_before_spawning() -> None:
    async with Harness(config=full_access()) as h, fake_registry(h) as registry:
        agent = h.create_agent("a")
        pty = h.ctx.pty
        for request in (
            {},
            {"command": "  "},
            {"command": "echo", "cwd": ""},
            {"command": "echo", "env": ["A=1"]},
            {"command": "echo", "env": {"A": "\ud800"}},
        ):
            with pytest.raises(DshError) as caught:
                await pty.open(agent, request)
            assert caught.value.code == "INVALID_ARGUMENT", request
        with pytest.raises(DshError):
            await pty.send(agent, "fake-1", {"data": "x", "submit": "yes"})
        with pytest.raises(DshError):
            pty.tail(agent, "fake-1", 0)
        assert registry.calls == []
        await agent.dispose()
        with pytest.raises(DshError) as caught:
            await pty.open(agent, {"command": "echo"})
        assert caught.value.code == "OWNER_NOT_LIVE"


async def test_env_on_a_non_shell_backend_is_refused() -> None:
    config = full_access(**{"pty-session": {"backend_type": "other"}})
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "pty_open", {"command": "x", "env": {"A": "1"}})
        assert result.is_error and result.text.startswith("error [INVALID_ARGUMENT]")
        result = await h.call_tool(agent, "pty_open", {"command": "x"})
        assert result.is_error and result.text.startswith("error [NO_BACKEND]")


async def test_a_session_opened_elsewhere_can_be_tailed_but_is_not_closed_by_the_facade() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        spawned = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        sid = spawned.session_id
        await h.ctx.pty.send(agent, sid, {"data": "echo shell-session"})
        assert "shell-session\n" in h.ctx.pty.tail(agent, sid).text
        assert h.ctx.pty.opened_sessions(agent) == []
        await h.ctx.pty.dispose()
        assert [s.session_id for s in h.ctx.terminals.list(agent)] == [sid]
        assert await h.ctx.terminals.kill(agent, sid, "test") is True


async def test_a_session_closed_by_the_registry_first_closes_quietly() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = await h.ctx.pty.open(agent, {"command": "echo x"})
        assert await h.ctx.terminals.kill(agent, opened.session_id, "elsewhere") is True
        assert await h.ctx.pty.close(agent, opened.session_id) is False
        await agent.dispose()  # nothing left for either dispose effect; no error


async def test_the_facade_keeps_no_agent_alive() -> None:
    async with Harness(config=full_access()) as h:
        agent = Agent("transient")
        opened = await h.ctx.pty.open(agent, {"command": "echo x"})
        await agent.dispose()
        assert gone(opened.pid)
        ref = weakref.ref(agent)
        del agent
        gc.collect()
        assert ref() is None


@pytest.mark.parametrize("kind", ["fake", "real"])
async def test_owner_disposed_during_an_open_fails_it_and_leaves_nothing(kind: str) -> None:
    async with Harness(config=full_access()) as h:
        registry = FakeRegistry(fake_backend(h)) if kind == "fake" else None
        with contextlib.ExitStack() as stack:
            if registry is not None:
                stack.enter_context(h.ctx.override("terminals", registry))
            agent = h.create_agent("a")
            opening = asyncio.ensure_future(h.ctx.pty.open(agent, {"command": "sleep 30"}))
            await asyncio.sleep(0.3)
            assert not opening.done()
            await agent.dispose()
            with pytest.raises(TerminalError) as caught:
                await asyncio.wait_for(opening, 10)
            assert caught.value.code == "OWNER_NOT_LIVE"
            assert h.ctx.pty.opened_sessions(agent) == []
            if registry is not None:
                assert registry.sessions == {}
            else:
                assert h.ctx.terminals.list(agent) == []


async def test_tail_through_the_real_registry_is_unsupported_without_the_capability() -> None:
    class FakePlugin:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name="fake-backend", inject=("terminals",))

        @hookimpl
        def dsh_apply(self, ctx: Any) -> None:
            ctx.on_unload(ctx.terminals.register_backend(FakeBackend("plain")))

    async with Harness(plugins=[*CORE, pty_plugin, FakePlugin()], config=full_access()) as h:
        agent = h.create_agent("a")
        spawned = await h.ctx.terminals.spawn(agent, SpawnRequest(type="plain"))
        with pytest.raises(TerminalError) as caught:
            h.ctx.pty.tail(agent, spawned.session_id)
        assert caught.value.code == "UNSUPPORTED"
        assert "complete_lines_since" in str(caught.value)
        assert h.ctx.pty.opened_sessions(agent) == []
        await agent.dispose()
