"""The environment a terminal child starts with.

A model drives the terminal and can print anything it finds there, so the host's
credentials must not leak into it: every name that looks like a credential is dropped,
and so is every ``DSH_*`` name, because those carry the host's own session markers and a
nested session must get fresh ones from its backend, never inherit a parent's.

:data:`SOCKET_VARIABLES` names the variables that point a program at a host IPC endpoint
(an ssh or gpg agent, the session bus, a display, tmux, docker). An unconfined shell
keeps them — it can reach those endpoints anyway, and ``ssh`` through an agent is often
the point. A confined shell must not: the sandbox removes them (see
:mod:`dsh_terminal_core.sandbox.bwrap`), since the endpoints they name are hidden there
and a leaked path is a map to what the sandbox hides.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["SOCKET_VARIABLES", "child_environment", "is_scrubbed_name"]

_CREDENTIAL_SHAPED = re.compile(r"KEY|PASSWORD|SECRET|TOKEN", re.IGNORECASE)
_HOST_PREFIX = "DSH_"

SOCKET_VARIABLES: frozenset[str] = frozenset(
    {
        "SSH_AUTH_SOCK",
        "GPG_AGENT_INFO",
        "DBUS_SESSION_BUS_ADDRESS",
        "DBUS_SYSTEM_BUS_ADDRESS",
        "XDG_RUNTIME_DIR",
        "DOCKER_HOST",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "PULSE_SERVER",
        "TMUX",
        "TMUX_PANE",
    }
)


def is_scrubbed_name(name: str) -> bool:
    """Return True if ``name`` is never inherited from the host environment.

    Credential-shaped names match case-insensitively anywhere in the name
    (``aws_secret_access_key``, ``GITHUB_TOKEN``, ``PGPASSWORD``); host markers are the
    names that start with ``DSH_`` exactly as written.
    """
    return name.startswith(_HOST_PREFIX) or _CREDENTIAL_SHAPED.search(name) is not None


def child_environment(
    overrides: Mapping[str, str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Build a child environment: ``base`` (default ``os.environ``) scrubbed, then overrides.

    Overrides are applied after scrubbing and are never filtered: a backend that sets
    ``DSH_SHELL=1`` or a caller that deliberately passes a token gets exactly what it asked
    for. The result is a fresh dict the caller may mutate.
    """
    env = _scrubbed_host() if base is None else _scrubbed(base)
    if overrides:
        env.update(overrides)
    return env


def _scrubbed(source: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in source.items() if not is_scrubbed_name(name)}


# The host environment as last scrubbed: (the raw environment it came from, the result).
_host_scrubbed: tuple[dict[bytes, bytes], dict[str, str]] | None = None


def _scrubbed_host() -> dict[str, str]:
    """``os.environ`` scrubbed; a fresh dict.

    Every terminal open needs it, and reading ``os.environ`` item by item decodes each
    name and value in Python (hundreds of calls for a usual environment), on the event
    loop. The raw environment behind ``os.environ`` (bytes, updated by every change made
    through it) is compared with the one last scrubbed, in C; only a change scrubs again.
    Where that mapping is not there to compare, every call scrubs.
    """
    global _host_scrubbed
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return _scrubbed(os.environ)
    known = _host_scrubbed
    if known is not None and known[0] == raw:
        return dict(known[1])
    snapshot = dict(raw)
    env = _scrubbed(os.environ)
    _host_scrubbed = (snapshot, env)
    return dict(env)
