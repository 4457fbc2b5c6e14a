"""The shell environment every contender runs bash in, and the prompt it waits for."""

from __future__ import annotations

import os
from typing import Literal

from dsh_terminal_bash.environment import PROMPT, shell_environment

__all__ = [
    "MARKER_START",
    "PROMPT_BYTES",
    "REPL_PROMPT",
    "SHELL_ARGV",
    "Expect",
    "bench_environment",
    "prompt_settled",
]

SHELL_ARGV = ["/bin/bash", "--noprofile", "--norc", "-i"]
MARKER_START = b"\x1b]133;D;"
PROMPT_BYTES = PROMPT.encode()
REPL_PROMPT = b">>> "

Expect = Literal["prompt", "repl"]
"""What a baseline waits for: the shell's marker and prompt, or Python's ``>>>``."""


def bench_environment(owner_id: str, session_id: str) -> dict[str, str]:
    """The parent's environment without ``DSH_*`` names, plus the backend's overrides.

    Baselines carry the same ``DSH_SHELL=1`` and ``DSH_SESSION_ID`` as the bash backend's
    shells, so one leak check covers every contender.
    """
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("DSH_")}
    env.update(shell_environment(owner_id, session_id))
    return env


def prompt_settled(tail: bytes, expect: Expect) -> bool:
    """True when ``tail`` (the newest output bytes) ends at the awaited prompt."""
    if expect == "repl":
        return tail.endswith(REPL_PROMPT)
    start = tail.rfind(MARKER_START)
    if start < 0:
        return False
    bel = tail.find(b"\x07", start)
    return bel >= 0 and tail[bel + 1 :] == PROMPT_BYTES
