"""Plugin ``sandbox-bwrap``: the bubblewrap sandbox as ``ctx.sandbox``."""

from __future__ import annotations

from ..containers import SandboxBwrapContainer
from ..hookspecs import hookimpl
from ..plugins import PluginInfo
from ..sandbox.bwrap import BwrapConfig as Config


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="sandbox-bwrap",
        description="Confines terminal shells with bubblewrap according to the sandbox policy.",
        provides=("sandbox",),
        config=Config,
        container=SandboxBwrapContainer,
    )
