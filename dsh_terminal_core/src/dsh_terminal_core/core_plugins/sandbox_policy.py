"""Plugin ``sandbox-policy``: per-owner sandbox mode resolution as ``ctx.sandbox_policy``."""

from __future__ import annotations

from ..containers import SandboxPolicyContainer
from ..hookspecs import hookimpl
from ..plugins import PluginInfo
from ..sandbox.policy import SandboxPolicyConfig as Config


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="sandbox-policy",
        description="Sandbox modes (read-only, workspace-write, danger-full-access) per owner.",
        provides=("sandbox_policy",),
        config=Config,
        container=SandboxPolicyContainer,
    )
