"""Plugin ``secrets``: named secrets as ``ctx.secrets`` for ``terminal_send {secret}``."""

from __future__ import annotations

import pluggy
from dependency_injector import containers, providers

from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from .service import SecretsConfig, SecretsService

__all__ = ["SecretsContainer", "dsh_apply", "dsh_plugin_info"]

Config = SecretsConfig


class SecretsContainer(containers.DeclarativeContainer):
    """Named secrets (``ctx.secrets``); third-party sources come through the plugin manager."""

    config = providers.Dependency(instance_of=SecretsConfig)
    plugin_manager = providers.Dependency(instance_of=pluggy.PluginManager)
    secrets = providers.Singleton(SecretsService, config, plugin_manager)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="secrets",
        description="Named secrets from the environment, a private file and secret_source hooks.",
        provides=("secrets",),
        config=Config,
        container=SecretsContainer,
    )


@hookimpl
def dsh_apply() -> None:
    """Contributes only ``ctx.secrets``; the terminal tools use it when it is loaded."""
