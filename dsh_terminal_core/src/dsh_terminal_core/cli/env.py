"""``dsh-terminal env``: what the user's login shell gives a session (SPEC §32.1).

It builds the harness a server would (the same config file and sandbox flags), asks
every backend that can capture the login environment to do so — once, under the
sandbox an owner gets — and prints what it captured: names by default, values with
``--values``. Secret-shaped variables were dropped by the capture itself; only their
names are shown, as removed. A backend whose ``environment`` is ``"clean"`` is captured
too, so a user sees what ``"login"`` would apply before turning it on.
"""

from __future__ import annotations

import os
import shlex
import textwrap

from ..kernel.configfile import build_config
from ..kernel.harness import Harness
from ..sandbox.login import LOGIN_DIALECTS, LoginEnvironment, LoginEnvironmentSource

__all__ = ["env_report"]

_WIDTH = 100


async def env_report(
    config_path: str | None,
    sandbox: str | None,
    workspace: str | None,
    *,
    values: bool = False,
    kind: str | None = None,
) -> tuple[str, int]:
    """The report and the exit status: 0 when every capture worked, 1 when one failed,
    2 when no backend (of type ``kind``) captures login environments."""
    config = build_config(config_path, sandbox, workspace)
    async with Harness(config=config) as harness:
        if not harness.ctx.has("terminals"):
            return "no terminal backends are loaded", 2
        terminals = harness.ctx.terminals
        sources: list[tuple[str, LoginEnvironmentSource]] = []
        for name in terminals.list_backends():
            backend = terminals.backend(name)
            if isinstance(backend, LoginEnvironmentSource) and kind in (None, name):
                sources.append((name, backend))
        if not sources:
            wanted = f"of type {kind!r} " if kind is not None else ""
            return f"no loaded terminal backend {wanted}captures a login environment", 2
        agent = harness.create_agent(f"dsh-terminal-env-{os.getpid()}")
        blocks, status = [], 0
        for name, backend in sources:
            captured = await backend.login_environment(agent)
            blocks.append(_describe(name, backend.environment, captured, values))
            status = status or (0 if captured.usable else 1)
        await agent.dispose()
        return "\n\n".join(blocks), status


def _describe(kind: str, environment: str, captured: LoginEnvironment, values: bool) -> str:
    applied = (
        "applied to every new session"
        if environment == "login"
        else 'not applied: set environment = "login" in its config to apply it'
    )
    lines = [
        f"terminal type {kind!r}: environment {environment!r} ({applied})",
        f"login shell: {' '.join(captured.argv)} ... (sandbox: {captured.sandbox}, "
        f"{captured.elapsed_s:.2f} s)",
    ]
    if not captured.usable:
        lines.append(f"NOT CAPTURED: {captured.problem}; sessions start clean")
        if captured.output:
            lines.append("what it printed:")
            lines += ["  " + line for line in captured.output.splitlines()]
        return "\n".join(lines)
    names = sorted(captured.variables)
    if values:
        lines.append(f"variables ({len(names)}):")
        lines += [f"  {name}={shlex.quote(captured.variables[name])}" for name in names]
    else:
        lines.append(_wrapped(f"variables ({len(names)}, --values shows them)", names))
    if captured.dialect in LOGIN_DIALECTS:  # a shell that reports its definitions
        lines.append(_wrapped(f"functions ({len(captured.functions)})", captured.functions))
        lines.append(_wrapped(f"aliases ({len(captured.aliases)})", captured.aliases))
    if captured.removed:
        lines.append(_wrapped("removed as secret-shaped (never shown)", captured.removed))
    return "\n".join(lines)


def _wrapped(title: str, names: tuple[str, ...] | list[str]) -> str:
    body = " ".join(names) if names else "-"
    return textwrap.fill(
        body, _WIDTH, initial_indent=f"{title}: ", subsequent_indent="  ", break_on_hyphens=False
    )
