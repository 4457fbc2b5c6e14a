"""Applying the user's login environment to a bash session (``environment = "login"``).

The capture itself is shell-neutral (:mod:`dsh_terminal_core.sandbox.login`); what is
bash's own is how a session takes it: the variables go into the session's environment
under the backend's own (a login ``PS1``, ``TERM`` or ``PAGER`` never beats the
controlled ones), and the functions and aliases — only when the login shell was bash
too — are replayed by :data:`LOGIN_RC`, given as ``--rcfile`` in place of ``--norc``,
from variables it removes again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dsh_terminal_core.sandbox.login import LoginEnvironment

__all__ = ["LOGIN_RC", "login_arguments", "login_variables"]

LOGIN_RC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loginrc.bash")

_DEFINITIONS = "DSH_LOGIN_DEFINITIONS_"
# Characters per variable: even four bytes each stays under the kernel's bound on one
# environment string (MAX_ARG_STRLEN, 128 KiB).
_CHUNK = 30000


def _rc_readable(confined: bool) -> bool:
    """A confined shell has a /tmp of its own: an rc file installed under the host's
    /tmp is not there to read."""
    if not confined:
        return True
    return os.path.commonpath([os.path.realpath(LOGIN_RC), "/tmp"]) != "/tmp"


def login_variables(captured: LoginEnvironment, *, confined: bool) -> tuple[dict[str, str], bool]:
    """The variables a session gets from ``captured``, and whether it needs the rc file.

    The definitions ride along (in pieces) only when the login shell was bash and the rc
    file can be read where the session runs.
    """
    if not captured.usable:
        return {}, False
    env = dict(captured.variables)
    replay = captured.dialect == "bash" and bool(captured.definitions) and _rc_readable(confined)
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
