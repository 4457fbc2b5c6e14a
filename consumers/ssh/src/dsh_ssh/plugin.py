"""Plugin ``ssh``: remote shells for agents over the OpenSSH client, built on ``ctx.pty``.

It needs ``pty`` (so ``dsh-pty-session`` is a hard startup dependency) and registers
tools; it never uses the terminal tools or a backend. It reads ``sandbox_policy`` when a
harness has one, to refuse at once when the owner's shells have no network. Applying it
registers four tools and starts nothing.
"""

from __future__ import annotations

from dsh_terminal_core import Context, PluginInfo, hookimpl

from .config import SshConfig as Config
from .container import SshContainer

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="ssh",
        description="Remote shells over OpenSSH (ssh_open/run/interrupt/close) on ctx.pty.",
        config=Config,
        container=SshContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, container: SshContainer) -> None:
    service = container.service()
    ctx.on_unload(service.dispose)
    for tool in container.tools():
        ctx.tools.register(tool)
