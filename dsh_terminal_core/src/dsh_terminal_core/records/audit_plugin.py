"""Plugin ``audit``: one JSON line per tool call in the configured file (SPEC §23)."""

from __future__ import annotations

from dependency_injector import containers, providers

from ..kernel.context import Context
from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from .audit import AuditConfig, AuditLog

__all__ = ["AuditContainer", "dsh_apply", "dsh_plugin_info"]

Config = AuditConfig


class AuditContainer(containers.DeclarativeContainer):
    """The audit log (``ctx.audit``), told of every call by ``ctx.tools``."""

    config = providers.Dependency(instance_of=AuditConfig)
    audit = providers.Singleton(AuditLog, config)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="audit",
        description="Appends one JSON line per tool call to audit.file when it is set.",
        provides=("audit",),
        config=Config,
        container=AuditContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config) -> None:
    if config.file is None:
        return
    audit: AuditLog = ctx.audit  # through ctx, so the harness closes it at shutdown
    ctx.on_unload(ctx.tools.observe_calls(audit.record))
