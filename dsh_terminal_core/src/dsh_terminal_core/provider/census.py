"""Find processes by what their environment says about them.

Every shell the bash backend starts carries ``DSH_SHELL=1``, ``DSH_SESSION_ID=<agent>``
and ``DSH_PTY_SESSION_ID=<session>``, and so does everything it runs. Reading
``/proc/<pid>/environ`` therefore answers "what is still running for this agent?" even
for processes that left the terminal's process tree — the check the demo, the benchmarks
and the test suite make to prove nothing was left behind.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping

import psutil

__all__ = ["processes_with_env", "shells_of", "still_running"]


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


def shells_of(agent_id: str) -> list[int]:
    """Pids of the shells (and everything they started) of the agent named ``agent_id``."""
    return processes_with_env({"DSH_SHELL": "1", "DSH_SESSION_ID": agent_id})


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
