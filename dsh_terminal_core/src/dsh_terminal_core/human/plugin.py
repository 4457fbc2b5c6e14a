"""Plugin ``human``: watch links and asking a person for help, as ``ctx.human`` (SPEC §22).

It also taps every session's bytes for the browser's terminal (SPEC §31): the provider
hands each process through :meth:`.bytetap.ByteTap.wrap`, and the registry tells the tap
of each send (a secret to hide, what the session is doing for an overview). A recording
page finds a session's file through the ``recording`` plugin and the audit log through
the ``audit`` plugin, when they are loaded.
"""

from __future__ import annotations

from typing import Any

import attrs
import pluggy
from dependency_injector import containers, providers

from ..kernel.context import Context
from ..kernel.hookspecs import hookimpl
from ..kernel.plugins import PluginInfo
from ..provider.types import TerminalProvider, WrappingProvider
from ..registry import TerminalSessionService
from .bytetap import DEFAULT_RETAIN_BYTES, ByteTap
from .service import HumanService

__all__ = ["Config", "HumanConfig", "HumanContainer", "dsh_apply", "dsh_plugin_info"]


def _non_negative(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{attribute.name} must be a whole number >= 0, got {value!r}")


def _dir_or_none(_inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{attribute.name} must be a directory path or null, got {value!r}")


@attrs.frozen(kw_only=True)
class HumanConfig:
    """Config of the ``human`` plugin.

    ``replay_bytes``: how much of each session's latest output a watch page opened
    later replays in its terminal (at least 128 KiB; 0: no tap, pages show the text view).
    ``assets_dir``: where the browser files are (default: ``DSH_WEB_ASSETS``, else
    ``<sys.prefix>/share/dsh-terminal/web``, where ``scripts/install.sh`` puts them).
    """

    replay_bytes: int = attrs.field(default=DEFAULT_RETAIN_BYTES, validator=_non_negative)
    assets_dir: str | None = attrs.field(default=None, validator=_dir_or_none)


Config = HumanConfig


class HumanContainer(containers.DeclarativeContainer):
    """The watch links over the registry; a host shows asks through the plugin manager."""

    config = providers.Dependency(instance_of=HumanConfig)
    subprocess = providers.Dependency(instance_of=TerminalProvider)  # type: ignore[type-abstract]
    terminals = providers.Dependency(instance_of=TerminalSessionService)
    plugin_manager = providers.Dependency(instance_of=pluggy.PluginManager)
    human = providers.Singleton(HumanService, terminals, plugin_manager)


@hookimpl
def dsh_plugin_info() -> PluginInfo:
    return PluginInfo(
        name="human",
        description="Watch links to sessions: a live page, taking over, handing back.",
        provides=("human",),
        config=Config,
        container=HumanContainer,
    )


@hookimpl
def dsh_apply(ctx: Context, config: Config, container: HumanContainer) -> None:
    """``ctx.human``, with the byte tap on every session the provider spawns."""
    human: HumanService = container.human()
    human.assets_dir = config.assets_dir
    provider = container.subprocess()
    if config.replay_bytes > 0 and isinstance(provider, WrappingProvider):
        tap = ByteTap(config.replay_bytes)
        human.tap = tap
        ctx.on_unload(provider.add_process_wrapper(tap.wrap))
        ctx.on_unload(container.terminals().observe_sends(tap))

    def recording_of(session_id: str) -> str | None:
        if not ctx.has("recordings"):
            return None
        recording = ctx.recordings.recording(session_id)
        return getattr(recording, "path", None) if recording is not None else None

    def audit_file() -> str | None:
        try:
            path = getattr(ctx.audit, "path", None) if ctx.has("audit") else None
        except Exception:  # the audit plugin is loaded but keeps no log
            return None
        return path if isinstance(path, str) else None

    human.find_recording = recording_of
    human.find_audit = audit_file
