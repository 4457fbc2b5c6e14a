"""A confined shell's exit status, with deaths by signal told apart from exits (SPEC §27.4).

Bubblewrap reports a child killed by signal n as its own exit status 128+n, so ``kill
-KILL $$`` and ``exit 137`` look alike from outside. The shell tells them apart for us:
its EXIT trap prints ``EXIT_MARKER_PREFIX`` and its status as it exits by itself, and a
shell killed by a signal runs no trap.
"""

from __future__ import annotations

import signal

from .environment import EXIT_MARKER_PREFIX

__all__ = ["TAIL_BYTES", "unfolded"]

TAIL_BYTES = 64
"""How much of the last output is looked at: the marker is the last thing printed."""


def unfolded(code: int, tail: bytes) -> tuple[int | None, str | None]:
    """(exit code, signal name) for an exit status that reads 128+n for a death by signal n.

    ``tail`` is the end of the shell's output. 128+n with the exit marker carrying the
    same status as the last output is a real ``exit 128+n``; without it, the death by
    signal n. Any other status is an exit code.
    """
    if not 128 < code < 128 + signal.NSIG:
        return code, None
    at = tail.rfind(EXIT_MARKER_PREFIX)
    if at >= 0 and tail[at + len(EXIT_MARKER_PREFIX) :].rstrip(b"\x07") == str(code).encode():
        return code, None
    try:
        return None, signal.Signals(code - 128).name
    except ValueError:
        return code, None
