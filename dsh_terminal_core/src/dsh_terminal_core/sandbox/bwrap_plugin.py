"""Plugin ``sandbox-bwrap``: the bubblewrap sandbox as ``ctx.sandbox``."""

from __future__ import annotations

from dependency_injector import containers, providers

from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from .bwrap import BwrapConfig, BwrapSandbox

__all__ = ["SandboxBwrapContainer", "dsh_plugin_info"]

Config = BwrapConfig


class SandboxBwrapContainer(containers.DeclarativeContainer):
    """The bubblewrap sandbox (``ctx.sandbox``)."""

    config = providers.Dependency(instance_of=BwrapConfig)
    sandbox = providers.Singleton(BwrapSandbox, config)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="sandbox-bwrap",
        description="Confines terminal shells with bubblewrap according to the sandbox policy.",
        provides=("sandbox",),
        config=Config,
        container=SandboxBwrapContainer,
    )
