"""Plugin ``subprocess-local``: the local PTY provider as ``ctx.subprocess``."""

from __future__ import annotations

from dependency_injector import containers, providers

from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from .terminal import LocalTerminalProvider

__all__ = ["SubprocessContainer", "dsh_plugin_info"]


class SubprocessContainer(containers.DeclarativeContainer):
    """The local PTY provider (``ctx.subprocess``)."""

    subprocess = providers.Singleton(LocalTerminalProvider)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="subprocess-local",
        description=(
            "Local PTY provider: spawn, foreground inspection, signalling, full-tree teardown."
        ),
        provides=("subprocess",),
        container=SubprocessContainer,
    )
