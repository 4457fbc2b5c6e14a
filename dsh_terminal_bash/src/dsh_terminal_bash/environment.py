"""The controlled shell environment: prompt protocol, pagers off, history, session identity.

The prompt protocol: every prompt starts with the private marker ``ESC ] 133;D;<$?> BEL``
followed by the controlled prompt text. The readiness ladder settles a send when the text
after the latest marker is exactly that prompt. The marker lives in ``PS1`` itself (inside
``\\[...\\]``, so readline does not count it as printed width); ``$?`` there is the last
command's status, because bash restores it after ``PROMPT_COMMAND``. Printing it with the
prompt, rather than from ``PROMPT_COMMAND``, puts bash's job notices (``[1]+ Done ...``),
which bash prints between the two, before the marker where they cannot hide it.

Each of the two variables re-asserts the other, so replacing either one alone never
loses the marker:

* ``PROMPT_COMMAND`` sets ``PS1`` back to the protocol prompt (and keeps both exported,
  so a shell started inside the session inherits the protocol): an in-shell ``PS1=...``
  (a model's command, a sourced script, a nested shell's rc file) never survives to the
  next prompt.
* ``PS1`` restores an unset or empty ``PROMPT_COMMAND`` while it is expanded, through a
  ``${PROMPT_COMMAND:=...}`` whose value is then matched against ``$?`` as a quoted
  prefix and so never printed. A ``PROMPT_COMMAND`` replaced by another command leaves
  ``PS1``, and with it the marker, in place.

Only replacing both falls back to the exact stdin-wait tier (no exit code). The
canonical values are kept in ``DSH_PS1`` and ``DSH_PROMPT_COMMAND``, which lets each one
be restored from the other without quoting one inside the other.

History: what the model types stays out of the user's history files. Bash saves no
history file when ``HISTFILE`` is empty (its in-memory history still works); Python's REPL
gets a startup file that keeps its history in memory (3.11+) and ``PYTHON_HISTORY``
(3.13+); node's REPL and ``less`` get their documented off switches.
"""

from __future__ import annotations

import os

from .login import LOGIN_RC, login_arguments
from .shell import LoginReplay, ShellPolicy

__all__ = [
    "EXIT_MARKER_PREFIX",
    "PROMPT",
    "PROMPT_COMMAND",
    "PS1",
    "PYTHON_STARTUP",
    "SHELL_MARKER",
    "BASH",
    "owner_marker",
    "session_environment",
    "shell_environment",
]

PROMPT = "dsh> "

# \[ \] mark the marker as zero-width for readline; ${?#"..."} prints $? and, as a side
# effect of expanding its pattern, restores PROMPT_COMMAND when it is unset or empty.
PS1 = '\\[\\e]133;D;${?#"${PROMPT_COMMAND:=$DSH_PROMPT_COMMAND}"}\\a\\]' + PROMPT

# An exit the shell takes itself (``exit 137``, end of input) runs its EXIT trap, which
# prints this with the status; a death by a signal prints nothing. Outside a sandbox the
# wait status tells the two apart; bubblewrap reports a death by signal n as exit status
# 128+n, so a confined session tells them apart by whether this came last (SPEC §27.4).
EXIT_MARKER_PREFIX = b"\x1b]133;E;"

PROMPT_COMMAND = 'export PROMPT_COMMAND PS1="$DSH_PS1"'
"""What ``PROMPT_COMMAND`` runs at every prompt after the first: as little as possible,
since bash parses and runs it on every prompt, in the time of every send."""

# The first prompt sets the EXIT trap, then puts the steady PROMPT_COMMAND in its own
# place. A variable the shell does not export says the trap is set, so a later ``trap
# ... EXIT`` of the user's own is never replaced, even when this runs again (PS1 restores
# it from DSH_PROMPT_COMMAND when PROMPT_COMMAND is emptied). A nested or exec'd shell
# inherits the steady one and sets no trap: its ``exit`` of 129-192, confined, reads as
# the signal.
FIRST_PROMPT_COMMAND = (
    '[ -n "${__dsh_exit_trap-}" ] || '
    '{ __dsh_exit_trap=1; trap \'printf "\\033]133;E;%s\\007" "$?"\' EXIT; }; '
    'PROMPT_COMMAND="export PROMPT_COMMAND PS1=\\"\\$DSH_PS1\\""; '
    'export PROMPT_COMMAND PS1="$DSH_PS1"'
)


# Every shell carries these, and so does everything it runs: how a census finds them.
SHELL_MARKER: dict[str, str] = {"DSH_SHELL": "1"}


def owner_marker(owner_id: str) -> dict[str, str]:
    """The variables every process of ``owner_id``'s shells carries."""
    return {**SHELL_MARKER, "DSH_SESSION_ID": owner_id}


PYTHON_STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pythonstartup.py")


def _history_off(private_tmp: bool) -> dict[str, str]:
    env = {
        "HISTFILE": "",
        "PYTHON_HISTORY": os.devnull,
        "NODE_REPL_HISTORY": "",
        "LESSHISTFILE": "-",
    }
    # A confined shell gets a private /tmp, so a startup file installed under the host's
    # /tmp is not there; naming it would only make every REPL print an error.
    if not (private_tmp and _under(PYTHON_STARTUP, "/tmp")):
        env["PYTHONSTARTUP"] = PYTHON_STARTUP
        user_startup = os.environ.get("PYTHONSTARTUP")
        if user_startup and user_startup != PYTHON_STARTUP:
            env["DSH_USER_PYTHONSTARTUP"] = user_startup
    return env


def _under(path: str, directory: str) -> bool:
    return os.path.commonpath([os.path.realpath(path), directory]) == directory


# A screen session's emulator understands what xterm sends; a line-mode session asks
# programs for plain output.
SCREEN_TERM = "xterm-256color"
LINE_TERM = "dumb"


def session_environment(
    owner_id: str, session_id: str, *, private_tmp: bool = False, screen: bool = False
) -> dict[str, str]:
    """What every shell's session gets on top of the provider's scrubbed environment,
    whatever the shell: its shell policy's prompt protocol is applied over this.

    ``private_tmp``: the shell runs confined, with a /tmp of its own. ``screen``: a
    screen session, whose emulator understands what xterm sends.
    """
    return {
        **_history_off(private_tmp),
        "TERM": SCREEN_TERM if screen else LINE_TERM,
        "NO_COLOR": "1",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "MANPAGER": "cat",
        "GH_PAGER": "cat",
        "SYSTEMD_PAGER": "cat",
        **owner_marker(owner_id),
        "DSH_PTY_SESSION_ID": session_id,
    }


BASH_PROTOCOL: dict[str, str] = {
    "DSH_PS1": PS1,
    "DSH_PROMPT_COMMAND": FIRST_PROMPT_COMMAND,
    "PS1": PS1,
    "PROMPT_COMMAND": FIRST_PROMPT_COMMAND,
}

BASH = ShellPolicy(
    section="terminal-bash",
    environment=BASH_PROTOCOL,
    continuation_prompts=("> ",),
    login_replay=LoginReplay(dialect="bash", reads=LOGIN_RC, args=login_arguments),
)
"""Bash's part of a session: the protocol is ``PS1`` and ``PROMPT_COMMAND`` above; its
default ``PS2`` is ``> ``; readline draws nothing of its own before a prompt; a bash login
shell's functions and aliases are replayed by ``loginrc.bash`` (``--rcfile``)."""


def shell_environment(
    owner_id: str, session_id: str, *, private_tmp: bool = False, screen: bool = False
) -> dict[str, str]:
    """The bash backend's overrides: :func:`session_environment` and bash's protocol."""
    return {
        **session_environment(owner_id, session_id, private_tmp=private_tmp, screen=screen),
        **BASH_PROTOCOL,
    }
