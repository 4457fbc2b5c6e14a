"""The controlled shell environment: prompt protocol, pagers off, session identity.

The prompt protocol: before every prompt, ``PROMPT_COMMAND`` prints the private marker
``ESC ] 133;D;<$?> BEL`` and then re-asserts ``PS1``. The readiness ladder settles a send
when the text after the latest marker is exactly the controlled prompt, so re-asserting
``PS1`` there means an in-shell ``PS1=...`` (a model's command, a sourced script) never
survives to the next prompt and can never silently kill the fast path.
"""

from __future__ import annotations

__all__ = ["PROMPT", "PROMPT_COMMAND", "shell_environment"]

PROMPT = "dsh> "

# printf expands \033 and \007 itself; "$?" is read first, before anything resets it.
PROMPT_COMMAND = f"printf '\\033]133;D;%s\\007' \"$?\"; PS1='{PROMPT}'"


def shell_environment(owner_id: str, session_id: str) -> dict[str, str]:
    """Overrides applied on top of the provider's scrubbed environment."""
    return {
        "TERM": "dumb",
        "NO_COLOR": "1",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        "MANPAGER": "cat",
        "GH_PAGER": "cat",
        "SYSTEMD_PAGER": "cat",
        "DSH_SHELL": "1",
        "DSH_SESSION_ID": owner_id,
        "DSH_PTY_SESSION_ID": session_id,
        "PS1": PROMPT,
        "PROMPT_COMMAND": PROMPT_COMMAND,
    }
