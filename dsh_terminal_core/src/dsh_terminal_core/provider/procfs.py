"""Small, allocation-light readers for Linux ``/proc``.

The inspector runs on the readiness hot path, so it reads ``/proc/<pid>/stat`` directly
instead of building psutil objects. Every reader returns None (or skips the entry) when
the process vanished or the file is unreadable; callers treat that as "unknown".
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import attrs

__all__ = ["ProcStat", "iter_pids", "read_stat"]

PROC = "/proc"


@attrs.frozen(kw_only=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this package uses."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    tty_nr: int
    tpgid: int
    starttime: int  # clock ticks after boot; fixed for the life of the process


def read_stat(pid: int, proc: str = PROC) -> ProcStat | None:
    """Read ``/proc/<pid>/stat``; None if the process is gone or the file is unreadable."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name is parenthesised and may itself contain spaces or ')'.
    close = raw.rfind(b")")
    if close < 0:
        return None
    fields = raw[close + 2 :].split()
    try:
        return ProcStat(
            pid=pid,
            state=fields[0].decode("ascii", "replace"),
            ppid=int(fields[1]),
            pgrp=int(fields[2]),
            session=int(fields[3]),
            tty_nr=int(fields[4]),
            tpgid=int(fields[5]),
            starttime=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def iter_pids(proc: str = PROC) -> Iterator[int]:
    """Yield the pid of every process visible in ``proc`` (threads are not listed)."""
    try:
        entries = os.listdir(proc)
    except OSError:
        return
    for entry in entries:
        if entry.isdigit():
            yield int(entry)
