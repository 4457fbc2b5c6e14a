"""Plugin host: discovery, ordering, startup errors, config isolation, DI override."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from dependency_injector import containers, providers

from dsh_terminal_core import Context
from dsh_terminal_core.kernel.config import positive_int
from dsh_terminal_core.kernel.errors import ConfigError, PluginLoadError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.hookspecs import hookimpl
from dsh_terminal_core.kernel.plugins import PluginInfo

FIXTURE = Path(__file__).parents[1] / "fixtures" / "greeter_plugin"


@pytest.fixture(scope="session")
def greeter_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugin distribution, really installed (pip) into a private directory."""
    target = tmp_path_factory.mktemp("greeter-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(FIXTURE),
        ],
        check=True,
        capture_output=True,
    )
    return target


class Svc:
    def __init__(self, label: str, dep: object = None) -> None:
        self.label = label
        self.dep = dep


def make_plugin(
    name: str,
    *,
    provides: tuple[str, ...] = (),
    inject: tuple[str, ...] = (),
    config: type[Any] | None = None,
    log: list[tuple[str, object]] | None = None,
) -> object:
    """A plugin object whose container needs ``inject`` and provides ``Svc`` for each key."""
    attrs_: dict[str, Any] = {"config": providers.Dependency()}
    for key in inject:
        attrs_[key] = providers.Dependency(instance_of=object)
    for key in provides:
        dep = attrs_[inject[0]] if inject else None
        attrs_[key] = providers.Singleton(Svc, f"{name}:{key}", dep)
    container = type(f"{name}Container", (containers.DeclarativeContainer,), attrs_)

    class Plugin:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name=name, provides=provides, config=config, container=container)

        @hookimpl
        def dsh_apply(self, ctx: Context, config: object) -> None:
            if log is not None:
                log.append((name, config))

    return Plugin()


@attrs.frozen(kw_only=True)
class LimitConfig:
    limit: int = attrs.field(default=3, validator=positive_int)


async def test_entry_point_discovery_loads_installed_distribution(
    greeter_site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(greeter_site))
    async with Harness(config={"test-greeter": {"salutation": "ahoy"}}) as h:
        names = [p.name for p in h.plugins]
        assert "test-greeter" in names and "test-greeting-consumer" in names
        assert names.index("test-greeter") < names.index("test-greeting-consumer")
        assert "dsh-test-greeter" in next(p for p in h.plugins if p.name == "test-greeter").source
        agent = h.create_agent("a")
        result = await h.call_tool(agent, "test_greet", {"who": "you"})
        assert (result.text, result.is_error) == ("ahoy, you", False)
        assert "ahoy, model" in h.system_prompt()
        assert h.ctx.tools.get("test_greet").plugin == "test-greeter"


async def test_load_order_follows_injection_not_listing() -> None:
    log: list[tuple[str, object]] = []
    c = make_plugin("c", inject=("b_svc",), log=log)
    b = make_plugin("b", provides=("b_svc",), inject=("a_svc",), log=log)
    a = make_plugin("a", provides=("a_svc",), log=log)
    async with Harness(plugins=[c, b, a]) as h:
        assert [p.name for p in h.plugins] == ["a", "b", "c"]
        assert [name for name, _ in log] == ["a", "b", "c"]
        # b's container received a's service through its DependenciesContainer.
        assert h.ctx.b_svc.dep is h.ctx.a_svc


async def test_missing_injection_names_plugin_key_and_distribution() -> None:
    consumer = make_plugin("gdb-mi", inject=("pty",))
    with pytest.raises(PluginLoadError) as info:
        await Harness(plugins=[consumer]).start()
    assert str(info.value) == (
        "plugin 'gdb-mi' injects 'pty' but no loaded plugin provides it; install dsh-pty-session"
    )


async def test_dependency_cycle_is_reported_with_its_path() -> None:
    x = make_plugin("x", provides=("x_svc",), inject=("y_svc",))
    y = make_plugin("y", provides=("y_svc",), inject=("x_svc",))
    with pytest.raises(PluginLoadError, match=r"plugin dependency cycle: 'x' -> 'y' -> 'x'"):
        await Harness(plugins=[x, y]).start()


async def test_unknown_config_key_names_plugin_and_known_keys() -> None:
    p = make_plugin("limited", config=LimitConfig)
    with pytest.raises(ConfigError) as info:
        await Harness(plugins=[p], config={"limited": {"limt": 4}}).start()
    assert info.value.plugin == "limited" and info.value.key == "limt"
    assert str(info.value) == "plugin 'limited' has no config key 'limt'; known keys: limit"


async def test_invalid_config_value_says_what_was_expected() -> None:
    p = make_plugin("limited", config=LimitConfig)
    with pytest.raises(ConfigError, match=r"'limited'.*limit must be a positive integer, got -1"):
        await Harness(plugins=[p], config={"limited": {"limit": -1}}).start()
    with pytest.raises(ConfigError, match=r"limit must be a positive integer, got '5'"):
        await Harness(plugins=[p], config={"limited": {"limit": "5"}}).start()


async def test_config_section_for_no_plugin_is_rejected() -> None:
    p = make_plugin("limited", config=LimitConfig)
    with pytest.raises(ConfigError, match=r"config section 'limitd' matches no loaded plugin"):
        await Harness(plugins=[p], config={"limitd": {}}).start()


async def test_each_plugin_gets_only_its_own_config() -> None:
    log: list[tuple[str, object]] = []
    one = make_plugin("one", config=LimitConfig, log=log)
    two = make_plugin("two", config=LimitConfig, log=log)
    async with Harness(plugins=[one, two], config={"one": {"limit": 7}}):
        configs = dict(log)
    assert configs["one"] == LimitConfig(limit=7)
    assert configs["two"] == LimitConfig(limit=3)


async def test_duplicate_provider_is_rejected() -> None:
    a = make_plugin("a", provides=("svc",))
    b = make_plugin("b", provides=("svc",))
    with pytest.raises(PluginLoadError, match=r"plugins 'a' and 'b' both provide 'svc'"):
        await Harness(plugins=[a, b]).start()


async def test_container_override_reaches_every_injection() -> None:
    a = make_plugin("a", provides=("a_svc",))
    b = make_plugin("b", provides=("b_svc",), inject=("a_svc",))
    async with Harness(plugins=[a, b]) as h:
        fake = Svc("fake")
        with h.ctx.override("a_svc", fake):
            assert h.ctx.a_svc is fake
            # b_svc is created inside the override, so its injected dependency is the fake.
            assert h.ctx.b_svc.dep is fake
        assert h.ctx.a_svc is not fake


async def test_harness_exit_disposes_services() -> None:
    disposed: list[str] = []

    class Disposable:
        def __init__(self, label: str) -> None:
            self.label = label

        async def dispose(self) -> None:
            disposed.append(self.label)

    class C(containers.DeclarativeContainer):
        thing = providers.Singleton(Disposable, "thing")

    class P:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name="p", provides=("thing",), container=C)

    async with Harness(plugins=[P()]) as h:
        assert h.ctx.thing.label == "thing"
    assert disposed == ["thing"]


async def test_plugin_without_info_hook_is_rejected() -> None:
    class Bare:
        pass

    with pytest.raises(PluginLoadError, match="does not implement dsh_plugin_info"):
        await Harness(plugins=[Bare()]).start()


async def test_hook_without_spec_is_rejected() -> None:
    class Typo:
        @hookimpl
        def dsh_plugin_info(self) -> PluginInfo:
            return PluginInfo(name="typo")

        @hookimpl
        def dsh_aply(self, ctx: Any, config: object) -> None:
            pass

    with pytest.raises(PluginLoadError, match="dsh_aply"):
        await Harness(plugins=[Typo()]).start()
