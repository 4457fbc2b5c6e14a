"""The joints: one plugin manager, hooks found by marker and spec name, host-built containers."""

from __future__ import annotations

from typing import Any

import pytest
from dependency_injector import containers, providers

from dsh_terminal_core import Agent, Context, ErrorCode, PluginInfo, TerminalError, hookimpl
from dsh_terminal_core.kernel import jobs_plugin as jobs
from dsh_terminal_core.kernel.errors import PluginLoadError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.wiring import kept_resolution
from dsh_terminal_core.provider import plugin as subprocess_local
from dsh_terminal_core.registry import SessionStatus, Snapshot, TerminalSessionService
from dsh_terminal_core.registry import plugin as terminals
from dsh_terminal_core.sandbox import (
    bwrap_plugin as sandbox_bwrap,
)
from dsh_terminal_core.sandbox import (
    policy_plugin as sandbox_policy,
)

from ..helpers import full_access

CORE = [subprocess_local, terminals, sandbox_policy, sandbox_bwrap, jobs]


class SpecnamePlugin:
    """Implements dsh_apply under another name, as the reference teaches."""

    def __init__(self) -> None:
        self.applied: list[tuple[object, object]] = []

    @hookimpl
    def dsh_plugin_info(self) -> PluginInfo:
        return PluginInfo(name="specname")

    @hookimpl(specname="dsh_apply")
    def register_everything(self, ctx: Context, container: object) -> None:
        self.applied.append((ctx, container))


async def test_a_hookimpl_with_specname_is_dispatched() -> None:
    plugin = SpecnamePlugin()
    async with Harness(plugins=[plugin]) as h:
        assert plugin.applied == [(h.ctx, None)]
        # Registered on the harness's own manager under the plugin's name.
        assert h.pm.get_plugin("specname") is plugin
        impls = h.pm.hook.dsh_apply.get_hookimpls()
        assert [(i.plugin_name, i.function.__name__) for i in impls] == [
            ("specname", "register_everything")
        ]


async def test_an_unmarked_hook_function_is_refused_with_its_name() -> None:
    calls: list[str] = []

    class Unmarked:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name="unmarked")

        def dsh_apply(self, ctx: Context, config: object) -> None:
            calls.append("applied")

    harness = Harness(plugins=[Unmarked()])
    with pytest.raises(PluginLoadError) as caught:
        await harness.start()
    assert "defines dsh_apply without the hookimpl marker" in str(caught.value)
    assert caught.value.code == ErrorCode.PLUGIN_LOAD
    assert calls == []
    assert harness.pm.list_name_plugin() == []  # nothing stays registered


async def test_every_plugin_is_registered_on_one_manager() -> None:
    async with Harness(plugins=CORE) as h:
        assert sorted(name for name, _ in h.pm.list_name_plugin()) == sorted(
            p.name for p in h.plugins
        )
        assert {i.plugin_name for i in h.pm.hook.dsh_plugin_info.get_hookimpls()} == {
            p.name for p in h.plugins
        }


async def test_an_implementation_may_take_a_subset_of_the_arguments() -> None:
    seen: list[object] = []

    class Narrow:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name="narrow")

        @hookimpl
        def dsh_apply(self, ctx: Context) -> None:
            seen.append(ctx)

    async with Harness(plugins=[Narrow()]) as h:
        assert seen == [h.ctx]


async def test_a_hookimpl_asking_for_an_unknown_argument_is_refused() -> None:
    class Greedy:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name="greedy")

        @hookimpl
        def dsh_apply(self, ctx: Context, services: object) -> None:
            pass

    with pytest.raises(PluginLoadError, match="services"):
        await Harness(plugins=[Greedy()]).start()


class NeedsTerminals(containers.DeclarativeContainer):
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    label = providers.Object("built by the host")


class Keeping:
    """A plugin that declares ``container`` and keeps what the host hands over in ``got``."""

    def __init__(self, name: str, container: type[containers.DeclarativeContainer]) -> None:
        self.name = name
        self.container = container
        self.got: list[Any] = []

    @hookimpl
    def dsh_plugin_info(self) -> PluginInfo:
        return PluginInfo(name=self.name, container=self.container)

    @hookimpl
    def dsh_apply(self, ctx: Context, container: Any) -> None:
        self.got.append(container)


async def test_the_host_builds_each_container_and_hands_it_over() -> None:
    consumer = Keeping("consumer", NeedsTerminals)
    async with Harness(plugins=[*CORE, consumer]) as h:
        plugin = next(p for p in h.plugins if p.name == "consumer")
        assert plugin.info.inject == ("terminals",)  # read from the container, not listed
        (container,) = consumer.got
        assert container.label() == "built by the host"
        assert container.terminals() is h.ctx.terminals
        fake = TerminalSessionService()
        with h.ctx.override("terminals", fake):
            assert container.terminals() is fake


async def test_a_need_of_the_wrong_type_fails_when_resolved() -> None:
    class WrongType(containers.DeclarativeContainer):
        jobs = providers.Dependency(instance_of=TerminalSessionService)

    confused = Keeping("confused", WrongType)
    async with Harness(plugins=[*CORE, confused]):
        with pytest.raises(Exception, match="is not an instance of"):
            confused.got[0].jobs()


class BusyRegistry:
    """Stands in for ctx.terminals: every owner has activity."""

    def __init__(self) -> None:
        self.asked: list[Agent] = []

    def has_owner_activity(self, owner: Agent) -> bool:
        self.asked.append(owner)
        return True


async def test_overriding_terminals_reaches_the_sandbox_mode_fence() -> None:
    async with Harness(plugins=CORE, config={"sandbox-policy": {"mode": "read-only"}}) as h:
        agent = h.create_agent("a")
        policy = h.ctx.sandbox_policy  # resolved before the override: it must still follow
        busy = BusyRegistry()
        with h.ctx.override("terminals", busy):
            with pytest.raises(TerminalError) as caught:
                policy.set_mode(agent, "workspace-write")
            assert caught.value.code == "SANDBOX_MODE_LOCKED"
            assert busy.asked == [agent]
        # The real registry: no sessions, so the change is allowed.
        assert policy.set_mode(agent, "workspace-write").mode.value == "workspace-write"
        assert busy.asked == [agent]


async def test_a_kept_resolution_follows_every_override_of_its_need() -> None:
    consumer = Keeping("consumer", NeedsTerminals)
    async with Harness(plugins=[*CORE, consumer]) as h:
        (container,) = consumer.got
        resolve = kept_resolution(container.terminals)
        real = h.ctx.terminals
        assert resolve() is real and resolve() is real
        outer, inner = TerminalSessionService(), TerminalSessionService()
        with h.ctx.override("terminals", outer):
            assert resolve() is outer
            with h.ctx.override("terminals", inner):
                assert resolve() is inner
            assert resolve() is outer
        assert resolve() is real
        # The container's own need overridden directly is seen as well.
        with container.terminals.override(providers.Object(inner)):
            assert resolve() is inner
        assert resolve() is real


def test_a_kept_resolution_of_a_plain_callable_is_that_callable() -> None:
    def make() -> int:
        return 7

    assert kept_resolution(make) is make


class ListsOne(TerminalSessionService):
    """Stands in for ctx.terminals: every owner has one session, ``pty-fake``."""

    def list(self, owner: Agent) -> list[Snapshot]:
        return [
            Snapshot(
                session_id="pty-fake",
                name=None,
                type="shell",
                pid=1,
                status=SessionStatus.running(),
                cwd="/",
            )
        ]


async def test_terminal_tools_follow_an_override_made_after_their_first_call() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        assert (await h.call_tool(agent, "terminal_list", {})).value == {"sessions": []}
        with h.ctx.override("terminals", ListsOne()):
            listed = await h.call_tool(agent, "terminal_list", {})
            assert [s["sessionId"] for s in listed.value["sessions"]] == ["pty-fake"]
        assert (await h.call_tool(agent, "terminal_list", {})).value == {"sessions": []}
