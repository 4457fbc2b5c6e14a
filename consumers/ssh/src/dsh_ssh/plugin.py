"""Plugin ``ssh``: remote shells for agents over the OpenSSH client, built on ``ctx.pty``.

It injects ``pty`` (so ``dsh-pty-session`` is a hard startup dependency) and ``tools``
only — never the terminal tools or a backend — and reads ``sandbox_policy`` when a
harness has one, to refuse at once when the owner's shells have no network. Applying it
registers four tools and starts nothing.
"""

from __future__ import annotations

from typing import Any

from dependency_injector import providers

from dsh_terminal_core.hookspecs import hookimpl
from dsh_terminal_core.plugins import PluginInfo

from .config import SshConfig as Config
from .container import SshContainer
from .tools import ssh_tools

__all__ = ["Config", "dsh_apply", "dsh_plugin_info"]


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="ssh",
        description="Remote shells over OpenSSH (ssh_open/run/interrupt/close) on ctx.pty.",
        inject=("pty", "tools"),
        optional_inject=("sandbox_policy",),
        config=Config,
    )


@hookimpl
def dsh_apply(ctx: Any, config: Config) -> None:
    deps = ctx.dependencies(["pty"], ["sandbox_policy"])
    container = SshContainer(
        config=providers.Object(config), pty=deps.pty, sandbox_policy=deps.sandbox_policy
    )
    container.check_dependencies()
    service = container.service()
    ctx.on_unload(service.dispose)
    for tool in ssh_tools(lambda: service):
        ctx.tools.register(tool)
