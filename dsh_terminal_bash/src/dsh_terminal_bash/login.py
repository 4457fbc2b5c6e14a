"""Applying the user's login environment to a session (``environment = "login"``).

The capture itself is shell-neutral (:mod:`dsh_terminal_core.sandbox.login`), and so is
most of how a session takes it: the variables go into the session's environment under
the backend's own (a login ``PS1``, ``TERM`` or ``PAGER`` never beats the controlled
ones), and the functions and aliases — only when the login shell was the same program,
as the shell policy's :class:`~.shell.LoginReplay` says — ride along in
``DSH_LOGIN_DEFINITIONS_<n>`` variables the shell's start-up code replays and removes.
Bash's start-up code is :data:`LOGIN_RC`, given as ``--rcfile`` in place of ``--norc``;
zsh's and fish's are in their own distributions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dsh_terminal_core.sandbox.login import LoginEnvironment

from .shell import LoginReplay

__all__ = ["LOGIN_RC", "login_arguments", "login_variables"]

LOGIN_RC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loginrc.bash")

_DEFINITIONS = "DSH_LOGIN_DEFINITIONS_"
# Characters per variable: even four bytes each stays under the kernel's bound on one
# environment string (MAX_ARG_STRLEN, 128 KiB).
_CHUNK = 30000


def _rc_readable(path: str | None, confined: bool) -> bool:
    """A confined shell has a /tmp of its own: an rc file installed under the host's
    /tmp is not there to read."""
    if not confined or path is None:
        return True
    return os.path.commonpath([os.path.realpath(path), "/tmp"]) != "/tmp"


def login_variables(
    captured: LoginEnvironment, replay_by: LoginReplay | None, *, confined: bool
) -> tuple[dict[str, str], bool]:
    """The variables a session gets from ``captured``, and whether it replays definitions.

    The definitions ride along (in pieces) only when the login shell's dialect is the
    one ``replay_by`` reads and its start-up code can be read where the session runs.
    """
    if not captured.usable:
        return {}, False
    env = dict(captured.variables)
    replay = (
        replay_by is not None
        and captured.dialect == replay_by.dialect
        and bool(captured.definitions)
        and _rc_readable(replay_by.reads, confined)
    )
    if replay:
        text = captured.definitions
        for n, start in enumerate(range(0, len(text), _CHUNK)):
            env[f"{_DEFINITIONS}{n}"] = text[start : start + _CHUNK]
    return env, replay


def login_arguments(shell_args: Sequence[str]) -> list[str]:
    """``shell_args`` with ``--norc`` replaced by ``--rcfile LOGIN_RC``; unchanged when
    the configured arguments have no ``--norc`` (they then read what they name)."""
    args: list[str] = []
    for arg in shell_args:
        args += ["--rcfile", LOGIN_RC] if arg == "--norc" else [arg]
    return args
