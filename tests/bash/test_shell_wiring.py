"""Every shell backend is the one shared wiring with its own config and policy (SPEC §32.2).

What the three backends share — their needs, the backend they build, their two hooks —
lives in :mod:`dsh_terminal_bash.wiring`; each plugin names only its config class and its
shell's policy. These tests hold each installed backend to that, through its entry point.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

import pytest
from dependency_injector import errors, providers

from dsh_terminal_bash import BashConfig, ShellBackend, ShellContainer
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.plugins import ENTRY_POINT_GROUP

from ..helpers import full_access

#: plugin name -> (its package, the config class's name, the policy's name, backend type)
SHELL_PLUGINS = {
    "terminal-bash": ("dsh_terminal_bash", "BashConfig", "BASH", "shell"),
    "terminal-zsh": ("dsh_terminal_zsh", "ZshConfig", "ZSH", "zsh"),
    "terminal-fish": ("dsh_terminal_fish", "FishConfig", "FISH", "fish"),
}


def _installed(name: str) -> tuple[Any, Any, Any]:
    """The plugin module behind entry point ``name``, its config class and its policy."""
    points = {p.name: p for p in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    if name not in points:
        pytest.skip(f"{name} is not installed")
    package, config, policy, _ = SHELL_PLUGINS[name]
    found = importlib.import_module(package)
    return points[name].load(), getattr(found, config), getattr(found, policy)


@pytest.mark.parametrize("name", sorted(SHELL_PLUGINS))
def test_a_shell_plugin_is_the_shared_wiring_with_its_config_and_policy(name: str) -> None:
    module, config, policy = _installed(name)
    info = module.dsh_plugin_info()
    # Its name is its config section, which its policy names in messages.
    assert info.name == name == policy.section
    assert info.config is module.Config is config
    container = info.container
    assert issubclass(container, ShellContainer) and container is not ShellContainer
    # The needs are the shared ones; the policy is filled, never read as a ctx key.
    assert info.inject == ("subprocess", "terminals", "sandbox_policy")
    assert info.optional_inject == ("sandbox", "owner_limits")
    # Its own providers: the backend reads this container's config and policy.
    for shared in ("config", "policy", "subprocess", "backend"):
        assert container.providers[shared] is not ShellContainer.providers[shared]
    built = container(
        config=providers.Object(config()),
        subprocess=providers.Object(None),
        terminals=providers.Object(None),
        sandbox_policy=providers.Object(None),
    )
    assert built.policy() is policy


@pytest.mark.parametrize("name", ["terminal-zsh", "terminal-fish"])
def test_a_shell_container_takes_only_its_own_config(name: str) -> None:
    module, _, _ = _installed(name)
    container = module.dsh_plugin_info().container
    with pytest.raises(errors.Error, match="instance of"):
        container(config=providers.Object(BashConfig())).config()


async def test_each_installed_shell_backend_is_registered_with_its_own_type() -> None:
    async with Harness(config=full_access()) as h:
        for name, (_, _, _, kind) in SHELL_PLUGINS.items():
            if h.pm.get_plugin(name) is None:
                continue
            backend = h.ctx.terminals.backend(kind)
            # Its type is its own config's default: the config reached the backend.
            assert isinstance(backend, ShellBackend) and backend.type == kind
        assert h.ctx.terminals.backend("shell") is not None
