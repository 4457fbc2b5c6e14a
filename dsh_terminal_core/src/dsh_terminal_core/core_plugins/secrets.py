"""Plugin ``secrets``: named secrets as ``ctx.secrets`` for ``terminal_send {secret}``."""

from __future__ import annotations

from ..containers import SecretsContainer
from ..hookspecs import hookimpl
from ..plugins import PluginInfo
from ..secrets import SecretsConfig as Config


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
