"""The controlled shell environment: prompt protocol, pagers off, history, session identity.

The prompt protocol: before every prompt, ``PROMPT_COMMAND`` prints the private marker
``ESC ] 133;D;<$?> BEL`` and then re-asserts ``PS1``. The readiness ladder settles a send
when the text after the latest marker is exactly the controlled prompt, so re-asserting
``PS1`` there means an in-shell ``PS1=...`` (a model's command, a sourced script) never
survives to the next prompt and can never silently kill the fast path.

History: what the model types stays out of the user's history files. Bash saves no
history file when ``HISTFILE`` is empty (its in-memory history still works); Python's REPL
gets a startup file that keeps its history in memory (3.11+) and ``PYTHON_HISTORY``
(3.13+); node's REPL and ``less`` get their documented off switches.
"""

from __future__ import annotations

import os

__all__ = [
    "PROMPT",
    "PROMPT_COMMAND",
    "PYTHON_STARTUP",
    "SHELL_MARKER",
    "owner_marker",
    "shell_environment",
]

PROMPT = "dsh> "

# printf expands \033 and \007 itself; "$?" is read first, before anything resets it.
PROMPT_COMMAND = f"printf '\\033]133;D;%s\\007' \"$?\"; PS1='{PROMPT}'"


# Every shell carries these, and so does everything it runs: how a census finds them.
SHELL_MARKER: dict[str, str] = {"DSH_SHELL": "1"}


def owner_marker(owner_id: str) -> dict[str, str]:
    """The variables every process of ``owner_id``'s shells carries."""
    return {**SHELL_MARKER, "DSH_SESSION_ID": owner_id}


PYTHON_STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pythonstartup.py")


def _history_off() -> dict[str, str]:
    env = {
        "HISTFILE": "",
        "PYTHONSTARTUP": PYTHON_STARTUP,
        "PYTHON_HISTORY": os.devnull,
        "NODE_REPL_HISTORY": "",
        "LESSHISTFILE": "-",
    }
    user_startup = os.environ.get("PYTHONSTARTUP")
    if user_startup and user_startup != PYTHON_STARTUP:
        env["DSH_USER_PYTHONSTARTUP"] = user_startup
    return env


def shell_environment(owner_id: str, session_id: str) -> dict[str, str]:
    """Overrides applied on top of the provider's scrubbed environment."""
    return {
        **_history_off(),
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "MANPAGER": "cat",
        "GH_PAGER": "cat",
        "SYSTEMD_PAGER": "cat",
        **owner_marker(owner_id),
        "DSH_PTY_SESSION_ID": session_id,
        "PS1": PROMPT,
        "PROMPT_COMMAND": PROMPT_COMMAND,
    }
