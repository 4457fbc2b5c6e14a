"""Find processes by what their environment says about them.

A backend that marks its shells' environment declares the marker
(:class:`~dsh_terminal_core.terminals.MarkedBackend`, collected by
``ctx.terminals.process_markers(owner)``); everything a marked shell runs inherits it.
Reading ``/proc/<pid>/environ`` for the marker therefore answers "what is still running
for this owner?" even for processes that left the terminal's process tree — the check
the demo, the benchmarks and the test suite make to prove nothing was left behind. This
module knows no backend's variable names.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping

import psutil

__all__ = ["processes_with_env", "still_running"]


def processes_with_env(required: Mapping[str, str], proc: str = "/proc") -> list[int]:
    """Pids (other than this process) whose environment has every ``NAME=value`` given.

    Processes whose environment cannot be read (another user's, already gone) are
    skipped. Linux only; elsewhere the answer is empty.
    """
    needles = [f"\0{name}={value}\0".encode() for name, value in required.items()]
    me = os.getpid()
    found = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"{proc}/{entry}/environ", "rb") as handle:
                environ = b"\0" + handle.read() + b"\0"
        except OSError:
            continue
        if all(needle in environ for needle in needles):
            found.append(int(entry))
    return found


def still_running(identities: Iterable[tuple[int, float]]) -> list[int]:
    """Pids of ``(pid, psutil create_time)`` identities still alive (zombies count as gone).

    The start time makes a reused pid count as gone rather than as a survivor.
    """
    alive = []
    for pid, started in identities:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if proc.create_time() == started and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
    return alive
