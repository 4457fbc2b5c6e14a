"""Two facts about a process that readiness compares over time, read from ``/proc``.

* ``wake_count``: the voluntary context switches of its main thread. A process blocked
  in a read wait has the same count until it wakes; a count that moved between two looks
  means it woke (read something, handled a signal) and blocked again in between.
* ``executable_id``: the (device, inode) of its executable, to tell whether a process is
  another instance of a given program (a shell started inside the shell).

* ``run_stamp``: something that changes whenever a single-threaded process runs (its
  scheduler statistics), so a wait proven once is known to be the same wait later
  without looking at the process's system call again.

Each returns None when the process is gone or unreadable, and everywhere but Linux.
"""

from __future__ import annotations

import contextlib
import os

from .procfs import read_bytes

__all__ = ["executable_id", "quietly_asleep", "run_stamp", "wake_count"]

_VOLUNTARY = b"\nvoluntary_ctxt_switches:"
# /proc/<pid>/status is about 1.5 KiB; one read of this size takes it whole.
_STATUS_LIMIT = 8192


def wake_count(pid: int) -> int | None:
    """Return ``pid``'s voluntary context switches, or None if they cannot be read."""
    data = read_bytes(f"/proc/{pid}/status", _STATUS_LIMIT)
    if data is None:
        return None
    start = data.find(_VOLUNTARY)
    if start < 0:
        return None
    start += len(_VOLUNTARY)
    end = data.find(b"\n", start)
    with contextlib.suppress(ValueError):
        return int(data[start : end if end >= 0 else len(data)])
    return None


def executable_id(pid: int) -> tuple[int, int] | None:
    """Return the (device, inode) of ``pid``'s executable, or None if unreadable."""
    try:
        st = os.stat(f"/proc/{pid}/exe")
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def quietly_asleep(pid: int) -> bool | None:
    """True if ``pid`` sleeps (state S) with no signal pending for it; None if unknown.

    A process woken by a signal still shows its old system call until it runs; its
    state (R) and its pending-signal masks tell that it is about to leave the wait.
    """
    data = read_bytes(f"/proc/{pid}/status", _STATUS_LIMIT)
    if data is None:
        return None
    fields: dict[bytes, bytes] = {}
    for line in data.split(b"\n"):
        name, _, value = line.partition(b":")
        if name in (b"State", b"SigPnd", b"ShdPnd"):
            fields[name] = value.strip()
    if len(fields) != 3:
        return None
    if not fields[b"State"].startswith(b"S"):
        return False
    return int(fields[b"SigPnd"], 16) == 0 and int(fields[b"ShdPnd"], 16) == 0


def run_stamp(pid: int) -> bytes | None:
    """``pid``'s scheduler statistics (run time, wait time, time slices) if it has one thread.

    Equal stamps from two reads mean the process did not run in between. With more than
    one thread (or unknown) the answer is None: another thread may have run unseen.
    """
    try:
        # /proc/<pid>/task links to itself, its parent and one entry per thread.
        if os.stat(f"/proc/{pid}/task").st_nlink != 3:
            return None
    except OSError:
        return None
    return read_bytes(f"/proc/{pid}/schedstat", 256) or None
