"""Who descends from whom, kept current without rescanning ``/proc`` on every look.

Listing a process's descendants needs the parent of every process: the per-thread
``children`` files are missing on kernels built without ``CONFIG_PROC_CHILDREN``, and a
full scan of ``/proc`` costs over a millisecond on a busy machine. But pids are handed
out in increasing order (cyclically) and ``/proc/loadavg`` names the newest one, so after
one full scan only the pids allocated since need reading: a handful per probe. A wrap
of the pid space seen between two looks, or more new pids than a scan costs, falls back
to a full scan (a whole cycle of the pid space between two looks would go unseen).

Entries are what each process was when first read; a dead process stays listed until
its pid is handed out again (readers of the list find it gone). Thread ids share the pid
space, so a thread may be listed under its process's parent, which only adds a
duplicate of a process already listed.
"""

from __future__ import annotations

import attrs

from .procfs import PROC, iter_pids, last_pid, read_stat

__all__ = ["Lineage"]

_MAX_INCREMENT = 512  # more new pids than this: one full scan is cheaper
_GROWTH = 4  # rescan when the list grows this many times past the last full scan


@attrs.frozen
class _Entry:
    ppid: int
    starttime: int


class Lineage:
    """Parent links of the processes visible in ``proc``."""

    def __init__(self, proc: str = PROC) -> None:
        self._proc = proc
        self._entries: dict[int, _Entry] = {}
        self._children: dict[int, set[int]] = {}
        self._newest: int | None = None
        self._pending: set[int] = set()  # allocated but not yet readable at the last look
        self._scanned = 0

    def descendants(self, pid: int, starttime: int) -> list[tuple[int, int]] | None:
        """``(pid, starttime)`` of every process created under ``pid`` (which started at
        ``starttime``) as of now; None if the process list cannot be read."""
        if not self._refresh():
            return None
        found: list[tuple[int, int]] = []
        frontier = [pid]
        seen = {pid}
        while frontier:
            for child in self._children.get(frontier.pop(), ()):
                entry = self._entries[child]
                if child not in seen and entry.starttime >= starttime:
                    seen.add(child)
                    found.append((child, entry.starttime))
                    frontier.append(child)
        return found

    def _refresh(self) -> bool:
        newest = last_pid(self._proc)
        if newest is None:
            return False
        previous = self._newest
        if previous is not None and newest == previous and not self._pending:
            return True
        if (
            previous is None
            or newest < previous
            or newest - previous > _MAX_INCREMENT
            or len(self._entries) > _GROWTH * max(self._scanned, 64)
        ):
            self._scan()
        else:
            fresh = set(range(previous + 1, newest + 1)) | self._pending
            self._pending = set()
            for pid in sorted(fresh):
                found = read_stat(pid, self._proc)
                if found is not None:
                    self._put(pid, _Entry(found.ppid, found.starttime))
                else:
                    self._drop(pid)
                    if pid > previous:
                        self._pending.add(pid)  # may still be on its way into /proc
        self._newest = newest
        return True

    def _put(self, pid: int, entry: _Entry) -> None:
        self._drop(pid)
        self._entries[pid] = entry
        self._children.setdefault(entry.ppid, set()).add(pid)

    def _drop(self, pid: int) -> None:
        entry = self._entries.pop(pid, None)
        if entry is not None:
            siblings = self._children.get(entry.ppid)
            if siblings is not None:
                siblings.discard(pid)

    def _scan(self) -> None:
        self._entries = {}
        self._children = {}
        for pid in iter_pids(self._proc):
            found = read_stat(pid, self._proc)
            if found is not None:
                self._put(pid, _Entry(found.ppid, found.starttime))
        self._pending = set()
        self._scanned = len(self._entries)
