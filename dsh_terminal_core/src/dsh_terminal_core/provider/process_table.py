"""The process table as teardown sees it: identities, snapshots and checked signals.

A pid alone names a process only until it is reused, so teardown works on
:class:`ProcessIdentity` — ``(pid, create_time)`` — and every signal re-checks that the
pid still carries the same start time. The table is a protocol so tests can stage what a
real OS cannot stage on demand: pid reuse, zombies that are never reaped, children forked
at an exact moment.

On Linux the default table reads ``/proc`` directly and uses the kernel's start time
(seconds after boot). psutil's ``create_time`` adds the boot time, which Linux derives
from the wall clock at each read: an NTP step between two reads would make one process
look like two. Elsewhere psutil's ``create_time`` is recorded at creation and is stable.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs
import psutil

from .procfs import PROC, forks_since_boot, iter_pids, last_pid, pid_max, read_bytes

__all__ = [
    "MarkedTable",
    "ProcessIdentity",
    "ProcessInfo",
    "ProcessTable",
    "ProcfsProcessTable",
    "PsutilProcessTable",
    "ScanMark",
    "default_process_table",
]


@attrs.frozen
class ProcessIdentity:
    """One process, not just one pid: the pid plus its start time."""

    pid: int
    create_time: float


@attrs.frozen(kw_only=True)
class ProcessInfo:
    """One row of a process table snapshot."""

    pid: int
    ppid: int
    sid: int
    create_time: float
    zombie: bool

    @property
    def identity(self) -> ProcessIdentity:
        return ProcessIdentity(self.pid, self.create_time)


class ProcessTable(Protocol):
    """Read the process table and signal processes by identity."""

    def snapshot(self) -> Sequence[ProcessInfo]:
        """Return every process visible now; rows that vanish mid-scan are skipped."""
        ...

    def lookup(self, pid: int) -> ProcessInfo | None:
        """Return the process now holding ``pid``, or None if there is none."""
        ...

    def send_signal(self, identity: ProcessIdentity, signum: int) -> bool:
        """Signal ``identity`` if ``identity.pid`` still carries its start time.

        Returns True if the signal was delivered, False if the process is gone or the pid
        now belongs to another process. Never signals a process with another identity.
        """
        ...

    def ignores(self, identity: ProcessIdentity, signum: int) -> bool | None:
        """Return whether ``signum`` sent to ``identity`` has no effect; None if unknown.

        That is SIG_IGN, or — on Linux — a pid namespace's init (a sandbox's pid 1)
        without a handler for it: the kernel drops such a signal from outside the
        namespace. Teardown uses it to decide whether a second polite signal is worth
        sending and whether a polite wait can end any other way than in SIGKILL.
        """
        ...


@attrs.frozen
class ScanMark:
    """Where a full scan stood: the newest pid handed out and the number of processes
    created since boot, both read before it listed the table, and the pids it listed."""

    newest: int
    forks: int
    listed: frozenset[int]


@runtime_checkable
class MarkedTable(Protocol):
    """A table that can also say which processes appeared since an earlier full scan.

    Pids are handed out in increasing order, cyclically: until the counter comes back
    around, a pid listed by the earlier scan still names the same process, and every
    process created since (or still being created then, not yet listed) has a pid the
    scan did not list.
    """

    def marked_snapshot(self) -> tuple[Sequence[ProcessInfo], ScanMark | None]:
        """:meth:`ProcessTable.snapshot`, with its mark (None when it cannot be taken)."""
        ...

    def appeared_since(self, mark: ScanMark) -> Sequence[ProcessInfo] | None:
        """Rows of the processes listed now and not at ``mark``; None when the pid
        counter wrapped since, or cannot be read (then only a full scan can tell)."""
        ...


class _CheckedSignals:
    """Identity-checked signalling shared by the real tables.

    With a pidfd the process is pinned before its identity is checked, so the signal can
    only reach the process that was checked; without one (old kernels, macOS) there is the
    usual small window between the check and ``kill``.
    """

    def lookup(self, pid: int) -> ProcessInfo | None:
        raise NotImplementedError

    def ignores(self, identity: ProcessIdentity, signum: int) -> bool | None:
        return None  # psutil does not expose signal dispositions

    def send_signal(self, identity: ProcessIdentity, signum: int) -> bool:
        pidfd = _open_pidfd(identity.pid)
        try:
            current = self.lookup(identity.pid)
            if current is None or current.create_time != identity.create_time:
                return False
            try:
                if pidfd is not None:
                    signal.pidfd_send_signal(pidfd, signum)
                else:
                    os.kill(identity.pid, signum)
            except ProcessLookupError:
                return False
            return True
        finally:
            if pidfd is not None:
                os.close(pidfd)


class ProcfsProcessTable(_CheckedSignals):
    """The Linux table: one read of ``/proc/<pid>/stat`` per process, clock-step proof."""

    def __init__(self, proc: str = PROC) -> None:
        self._proc = proc
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        top = pid_max(proc)
        # Pids run from 300 to pid_max, then around again. Coming back around takes at
        # least a cycle's free pids; fewer than half a cycle of creations cannot do it
        # while under half the pids are in use (far from the exhaustion that breaks
        # every fork anyway).
        self._trusted_forks = (top - 300) // 2 if top is not None and top > 300 else 0

    def snapshot(self) -> Sequence[ProcessInfo]:
        return self._rows(iter_pids(self._proc))

    def marked_snapshot(self) -> tuple[Sequence[ProcessInfo], ScanMark | None]:
        # Counters before listing: whatever is created later counts after the mark.
        newest, forks = last_pid(self._proc), forks_since_boot(self._proc)
        pids = list(iter_pids(self._proc))
        mark = None
        if newest is not None and forks is not None:
            mark = ScanMark(newest=newest, forks=forks, listed=frozenset(pids))
        return self._rows(pids), mark

    def appeared_since(self, mark: ScanMark) -> Sequence[ProcessInfo] | None:
        pids = [pid for pid in iter_pids(self._proc) if pid not in mark.listed]
        # Counters after listing: a wrap before or during the listing shows in them.
        newest, forks = last_pid(self._proc), forks_since_boot(self._proc)
        if newest is None or forks is None or newest < mark.newest:
            return None
        if not 0 <= forks - mark.forks < self._trusted_forks:
            return None
        return self._rows(pids)

    def _rows(self, pids: Iterable[int]) -> list[ProcessInfo]:
        rows: list[ProcessInfo] = []
        for pid in pids:
            row = self.lookup(pid)
            if row is not None:
                rows.append(row)
        return rows

    def ignores(self, identity: ProcessIdentity, signum: int) -> bool | None:
        try:
            with open(f"{self._proc}/{identity.pid}/status", "rb") as handle:
                status = handle.read()
        except OSError:
            return None
        # Read first, check after: identity is never regained, so a match proves the
        # status belonged to this very process.
        current = self.lookup(identity.pid)
        if current is None or current.create_time != identity.create_time:
            return None
        try:
            ignored = int(_status_field(status, b"SigIgn"), 16)
            caught = int(_status_field(status, b"SigCgt"), 16)
        except ValueError:
            return None
        bit = 1 << (signum - 1)
        if ignored & bit:
            return True
        # pid 1 of a namespace below ours: only signals it handles (and SIGKILL) arrive.
        nspid = _status_field(status, b"NSpid").split()
        namespace_init = len(nspid) > 1 and nspid[-1] == b"1"
        return namespace_init and signum != signal.SIGKILL and not caught & bit

    def lookup(self, pid: int) -> ProcessInfo | None:
        # The fields of read_stat() that a row needs, parsed here without the rest: a
        # full scan does this for every process on the machine (a third cheaper).
        raw = read_bytes(f"{self._proc}/{pid}/stat")
        if raw is None:
            return None
        # The command name is parenthesised and may itself contain spaces or ')'.
        fields = raw[raw.rfind(b")") + 2 :].split(None, 20)
        try:
            return ProcessInfo(
                pid=pid,
                ppid=int(fields[1]),
                sid=int(fields[3]),
                create_time=int(fields[19]) / self._ticks,
                zombie=fields[0] in (b"Z", b"X"),
            )
        except (IndexError, ValueError):
            return None


class PsutilProcessTable(_CheckedSignals):
    """The portable table, read through psutil (the default where ``/proc`` is absent)."""

    def snapshot(self) -> Sequence[ProcessInfo]:
        rows: list[ProcessInfo] = []
        for proc in psutil.process_iter():
            info = self._describe(proc)
            if info is not None:
                rows.append(info)
        return rows

    def lookup(self, pid: int) -> ProcessInfo | None:
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, ValueError):
            return None
        return self._describe(proc)

    @staticmethod
    def _describe(proc: psutil.Process) -> ProcessInfo | None:
        try:
            with proc.oneshot():
                return ProcessInfo(
                    pid=proc.pid,
                    ppid=proc.ppid(),
                    sid=_session_of(proc.pid),
                    create_time=proc.create_time(),
                    zombie=proc.status() == psutil.STATUS_ZOMBIE,
                )
        except psutil.Error:
            return None


def default_process_table() -> ProcessTable:
    """Return the ``/proc`` table on Linux and the psutil table elsewhere."""
    if sys.platform.startswith("linux") and os.path.isdir(f"{PROC}/self"):
        return ProcfsProcessTable()
    return PsutilProcessTable()


def _status_field(status: bytes, name: bytes) -> bytes:
    """The value of line ``name:`` of a ``/proc/<pid>/status`` text; empty if it is absent.

    Found by its line start rather than by splitting every line: teardown asks several
    times per process, a thousand terminals at once.
    """
    key = b"\n" + name + b":"
    start = status.find(key)
    if start < 0:
        if not status.startswith(name + b":"):
            return b""
        start = -1
    start += len(key)
    end = status.find(b"\n", start)
    return status[start:] if end < 0 else status[start:end]


def _session_of(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def _open_pidfd(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    with contextlib.suppress(OSError):
        fd: int = opener(pid)
        return fd
    return None
