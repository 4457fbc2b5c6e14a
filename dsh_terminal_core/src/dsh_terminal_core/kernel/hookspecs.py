"""The hook contracts every dsh plugin implements.

A plugin is a module (or object) holding implementations of these hooks, marked with
:data:`hookimpl` (``@hookimpl(specname="dsh_apply")`` lets a function of another name
implement a hook). The harness registers every plugin on its one plugin manager, calls
:func:`dsh_plugin_info` to learn the plugin's name, what it provides, its config class
and its container; then, in dependency order, :func:`dsh_apply` with the shared context,
the plugin's own validated config and its built container. An implementation may take
any subset of a hook's arguments.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from dependency_injector.containers import DeclarativeContainer

    from .agents import Agent
    from .context import Context
    from .plugins import PluginInfo
    from .secret import Secret

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "dsh"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def dsh_plugin_info() -> PluginInfo:  # type: ignore[empty-body]
    """Describe this plugin: its name, the ctx keys it provides, its Config and container."""


@hookspec
def dsh_apply(ctx: Context, config: object, container: DeclarativeContainer | None) -> None:
    """Register what this plugin contributes. Called once, after everything it injects exists.

    ``config`` is an instance of the plugin's ``Config`` class, validated from the
    plugin's own section of the harness config and nobody else's. ``container`` is the
    plugin's container built by the host with every need wired and checked (``None``
    for a plugin that declares none). On reload both are new.
    """


@hookspec
def dsh_secret_source(name: str, owner: Agent) -> str | Secret | None:
    """Answer the secret called ``name`` for ``owner``, or None when this source lacks it.

    Every plugin may add a source (a keyring, a vault); the ``secrets`` service asks
    its configured environment variables and file first, then these implementations,
    and takes the first answer that is not None. An implementation may return an
    awaitable for a source that needs I/O. Never log or raise with the value in it.
    """


@hookspec
def dsh_ask_human(session_id: str, url: str, reason: str) -> None:
    """Show a person ``url``, a control link to ``session_id``, because the agent asks for help.

    ``terminal_ask_human`` calls it in-process (a client over MCP is asked through
    URL-mode elicitation instead); the call then waits for the person to take control
    and hand back, or for the link to expire. Runs synchronously: show the link, do not
    wait for the person. With no implementation the tool answers ``unavailable``.
    """


@hookspec
def dsh_agent_created(agent: Agent, ctx: Context) -> None:
    """``agent`` was just created by ``Harness.create_agent``; runs synchronously.

    A plugin with something to do for a new agent that takes I/O (the ``worlds`` plugin
    re-adopting the sessions a daemon kept for this agent id) starts it here and hands
    it to ``agent.expect(...)``: the agent's first tool call waits for it.
    """


@hookspec
def dsh_harness_closing(ctx: Context) -> None:
    """The harness is shutting down cleanly, before any agent is disposed; synchronous.

    The ``worlds`` plugin uses it to detach the sessions of worlds configured with
    ``persist: true`` instead of closing them (an MCP server being upgraded).
    """
