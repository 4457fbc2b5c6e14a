"""The hook contracts every dsh plugin implements.

A plugin is a module (or object) holding implementations of these hooks, marked with
:data:`hookimpl`. The harness calls :func:`dsh_plugin_info` once to learn the plugin's
name, what it provides and injects, and its config class; then, in dependency order,
:func:`dsh_apply` with the shared context and the plugin's own validated config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .context import Context
    from .plugins import PluginInfo

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "dsh"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def dsh_plugin_info() -> PluginInfo:  # type: ignore[empty-body]
    """Describe this plugin: its name, the ctx keys it provides and injects, its Config."""


@hookspec
def dsh_apply(ctx: Context, config: object) -> None:
    """Register what this plugin contributes. Called once, after everything it injects exists.

    ``config`` is an instance of the plugin's ``Config`` class, validated from the
    plugin's own section of the harness config and nobody else's.
    """
