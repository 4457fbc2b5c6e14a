"""How every shell backend is wired into the host: one container, one pair of hooks.

The bash, zsh and fish backends need the same core services and build the same
:class:`~.backend.ShellBackend`; only their config (a :class:`~.config.BashConfig`
subclass, the plugin's section) and their :class:`~.shell.ShellPolicy` differ (SPEC §32
item 2: what the backends share lives in one place). So a backend's plugin module is
one line::

    dsh_plugin_info, dsh_apply = shell_plugin("zsh backend: ...", ZshConfig, ZSH)

and its plugin name, which is its config section, is the policy's ``section``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dependency_injector import containers, providers

from dsh_terminal_core import Context, PluginInfo, hookimpl, optional_dependency
from dsh_terminal_core.provider import TerminalProvider
from dsh_terminal_core.registry import TerminalSessionService
from dsh_terminal_core.sandbox.bwrap import BwrapSandbox
from dsh_terminal_core.sandbox.limits import OwnerLimitsService
from dsh_terminal_core.sandbox.policy import SandboxPolicyService

from .backend import ShellBackend
from .config import BashConfig
from .shell import ShellPolicy

__all__ = ["ShellContainer", "shell_container", "shell_plugin"]


class ShellContainer(containers.DeclarativeContainer):
    """What a shell backend needs from the core, and the backend built from it.

    ``config`` is the backend's validated config and ``policy`` its shell's part; every
    other ``Dependency`` names a ctx key. Never a plugin's container as it stands (its
    ``policy`` would read as a ctx key): :func:`shell_container` makes one for a config
    class and a policy.
    """

    config = providers.Dependency(instance_of=BashConfig)
    policy = providers.Dependency(instance_of=ShellPolicy)
    subprocess = providers.Dependency(instance_of=TerminalProvider)  # type: ignore[type-abstract]
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    sandbox_policy = providers.Dependency(instance_of=SandboxPolicyService)
    sandbox = optional_dependency(BwrapSandbox)
    owner_limits = optional_dependency(OwnerLimitsService)
    backend = providers.Singleton(
        ShellBackend, subprocess, sandbox_policy, sandbox, config, policy, owner_limits=owner_limits
    )


def shell_container(config_type: type[BashConfig], policy: ShellPolicy) -> type[ShellContainer]:
    """The container of the backend configured by ``config_type``, whose shell is ``policy``.

    A subclass of :class:`ShellContainer` whose every provider is a fresh copy, with
    ``config`` taking only ``config_type`` instances and ``policy`` fixed. Redeclaring those
    two in a plain subclass is not enough: dependency-injector copies a container's
    providers without rewiring them, so ``backend`` would still read the base's own
    (``containers.copy`` does not rewire them either, as of 4.49).
    """
    base = ShellContainer.cls_providers
    memo: dict[int, Any] = {
        id(base["config"]): providers.Dependency(instance_of=config_type),
        id(base["policy"]): providers.Object(policy),
    }
    fresh = providers.deepcopy(dict(base), memo)
    name = config_type.__name__.removesuffix("Config") + "Container"
    doc = f"Wiring of the backend of ``{policy.section}``: the shared one, with its policy."
    made: type[ShellContainer] = type(name, (ShellContainer,), {**fresh, "__doc__": doc})
    return made


def shell_plugin(
    description: str, config_type: type[BashConfig], policy: ShellPolicy
) -> tuple[Callable[[], PluginInfo], Callable[[Context, BashConfig, ShellContainer], None]]:
    """The hooks of a shell backend's plugin: ``(dsh_plugin_info, dsh_apply)``.

    The plugin is named by ``policy.section`` (also its config section), reads
    ``config_type``, and registers the backend of :func:`shell_container` with
    ``ctx.terminals``, unregistered when the plugin unloads.
    """
    wiring = shell_container(config_type, policy)

    @hookimpl
    def dsh_plugin_info() -> PluginInfo:
        return PluginInfo(
            name=policy.section, description=description, config=config_type, container=wiring
        )

    @hookimpl
    def dsh_apply(ctx: Context, config: BashConfig, container: ShellContainer) -> None:
        ctx.on_unload(container.terminals().register_backend(container.backend()))

    return dsh_plugin_info, dsh_apply
