"""Plugin ``subprocess-local``: the local PTY provider as ``ctx.subprocess``."""

from __future__ import annotations

from ..containers import SubprocessContainer
from ..hookspecs import hookimpl
from ..plugins import PluginInfo


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
