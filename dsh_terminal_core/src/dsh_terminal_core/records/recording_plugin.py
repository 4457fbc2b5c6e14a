"""Plugin ``recording``: every session recorded as an asciicast v2 file (SPEC §23)."""

from __future__ import annotations

from dependency_injector import containers, providers

from ..kernel.context import Context
from ..kernel.errors import ConfigError
from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from ..provider.types import TerminalProvider, WrappingProvider
from ..registry.service import TerminalSessionService
from .recording import RecordingConfig, RecordingService

__all__ = ["RecordingContainer", "dsh_apply", "dsh_plugin_info"]

Config = RecordingConfig


class RecordingContainer(containers.DeclarativeContainer):
    """The recorder: wraps the provider's processes and watches the registry's sends."""

    config = providers.Dependency(instance_of=RecordingConfig)
    subprocess = providers.Dependency(instance_of=TerminalProvider)  # type: ignore[type-abstract]
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    recordings = providers.Singleton(RecordingService, config)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="recording",
        description="Records every session as an asciicast v2 file when recording.dir is set.",
        provides=("recordings",),
        config=Config,
        container=RecordingContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config, container: RecordingContainer) -> None:
    if config.dir is None:
        return
    provider = container.subprocess()
    if not isinstance(provider, WrappingProvider):
        raise ConfigError(
            f"recording.dir is set but the terminal provider ({type(provider).__name__}) "
            "cannot hand its processes to a recorder (add_process_wrapper)",
            "recording",
            "dir",
        )
    # Through ctx, so the harness disposes it (ends the recordings) at shutdown.
    service: RecordingService = ctx.recordings
    ctx.on_unload(provider.add_process_wrapper(service.wrap))
    ctx.on_unload(container.terminals().observe_sends(service))
