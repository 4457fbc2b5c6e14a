"""One look at one process's descriptors and memory through ``/proc/<pid>``.

A probe asks several questions about the same process in a row (what does fd 3 refer to,
which other fds hold the same pipe, what is at this address); :class:`ProcessFiles`
reads each answer at most once per look and keeps ``/proc/<pid>/mem`` open for the look
instead of reopening it for every read. A look is short-lived: what a process's
descriptors refer to is never kept across probes, because that can change at any moment.

:class:`KeptFiles` is the exception for the one process looked at on every send (the
session's shell): its main thread's ``schedstat`` and ``syscall`` files and its ``mem``
stay open across looks and are re-read with ``pread``, which regenerates their content.
Opening a ``/proc`` file costs several times what reading it does. The files are bound to
the task, not to its pid: once the process is gone they fail, never reporting another
process that took over the pid; its ``mem`` after an ``exec`` reads nothing and is
reopened.
"""

from __future__ import annotations

import contextlib
import os
from types import TracebackType

import attrs

from .procfs import PROC, read_text

__all__ = ["EpollEntry", "KeptFiles", "ProcessFiles", "epoll_entries"]

# Bits of an epoll entry's event mask that are flags rather than events; an entry with
# nothing else left (a fired EPOLLONESHOT entry) cannot wake its waiter.
_EPOLL_FLAG_BITS = (1 << 28) | (1 << 29) | (1 << 30) | (1 << 31)
_MISSING = object()
_READ_SIZE = 4096


class KeptFiles:
    """``/proc`` files of one process's main thread, kept open across looks; :meth:`close`."""

    def __init__(self, pid: int, proc: str = PROC) -> None:
        self.pid = pid
        #: ``/proc/<pid>/task``: its link count says whether the process has one thread.
        self.task_dir = f"{proc}/{pid}/task"
        self._task = f"{proc}/{pid}/task/{pid}"
        self._mem_path = f"{proc}/{pid}/mem"
        self._fd_dir = f"{proc}/{pid}/fd/"
        self._fd_paths: dict[int, str] = {}
        self._fds: dict[str, int] = {}
        self._closed = False

    def fd_path(self, fd: int) -> str:
        """``/proc/<pid>/fd/<fd>``, built once per descriptor number."""
        path = self._fd_paths.get(fd)
        if path is None:
            if len(self._fd_paths) >= 64:
                self._fd_paths.clear()
            path = self._fd_paths[fd] = f"{self._fd_dir}{fd}"
        return path

    def read(self, name: str) -> bytes | None:
        """The current content of the main thread's ``name`` (``schedstat``, ``syscall``)."""
        return self._pread(name, _READ_SIZE) or None

    def has_content(self, name: str) -> bool | None:
        """Whether the main thread's ``name`` is non-empty now; None when it cannot be read.

        One ``pread`` of a byte: ``children`` asked on every send costs that, where an
        open, read and close of the file each time cost several microseconds more.
        """
        data = self._pread(name, 1)
        return None if data is None else bool(data)

    def _pread(self, name: str, size: int) -> bytes | None:
        """Up to ``size`` bytes of the main thread's ``name`` from its start; None when
        it cannot be opened or read (the kept descriptor is then dropped)."""
        fd = self._fds.get(name)
        if fd is None:
            fd = self._open(name, f"{self._task}/{name}")
            if fd is None:
                return None
        try:
            return os.pread(fd, size, 0)
        except OSError:
            self._forget(name)
            return None

    def memory(self, address: int, size: int) -> bytes | None:
        """``size`` bytes at ``address``; reopened once when the process has exec'd since.

        The kept descriptor is read at once when there is one (every send asks).
        """
        fd = self._fds.get("mem")
        for _attempt in range(2):
            if fd is None:
                fd = self._open("mem", self._mem_path)
                if fd is None:
                    return None
            try:
                data = os.pread(fd, size, address)
            except (OSError, OverflowError):
                data = b""
            if len(data) == size:
                return data
            self._forget("mem")
            fd = None
        return None

    def close(self) -> None:
        """Close every kept file; later reads answer None."""
        self._closed = True
        for name in list(self._fds):
            self._forget(name)

    def _open(self, name: str, path: str) -> int | None:
        fd = self._fds.get(name)
        if fd is None and not self._closed:
            try:
                fd = self._fds[name] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        return fd

    def _forget(self, name: str) -> None:
        fd = self._fds.pop(name, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


class ProcessFiles:
    """Cached reads of one process's ``fd``, ``fdinfo`` and ``mem``; use as a context manager.

    With ``kept`` (the same process's :class:`KeptFiles`) its main thread's files and its
    memory are read through those instead of being opened for this look.
    """

    def __init__(self, pid: int, proc: str = PROC, kept: KeptFiles | None = None) -> None:
        self.pid = pid
        self.kept = kept if kept is not None and kept.pid == pid else None
        self._base = f"{proc}/{pid}"
        self._links: dict[int, str | None] = {}
        self._stats: dict[int, os.stat_result | None] = {}
        self._table: dict[str, list[int]] | None = None
        self._mem: int | None = None
        self._mem_failed = False

    def __enter__(self) -> ProcessFiles:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close ``/proc/<pid>/mem`` if this look opened it."""
        if self._mem is not None:
            with contextlib.suppress(OSError):
                os.close(self._mem)
            self._mem = None

    def link(self, fd: int) -> str | None:
        """The target of ``fd`` as ``/proc`` names it (``pipe:[123]``, a path, ...)."""
        known = self._links.get(fd, _MISSING)
        if known is not _MISSING:
            return known  # type: ignore[return-value]
        try:
            target: str | None = os.readlink(f"{self._base}/fd/{fd}")
        except OSError:
            target = None
        self._links[fd] = target
        return target

    def stat(self, fd: int) -> os.stat_result | None:
        """``stat`` of what ``fd`` refers to; None if it is closed or unreadable."""
        known = self._stats.get(fd, _MISSING)
        if known is not _MISSING:
            return known  # type: ignore[return-value]
        try:
            result: os.stat_result | None = os.stat(f"{self._base}/fd/{fd}")
        except OSError:
            result = None
        self._stats[fd] = result
        return result

    def info(self, fd: int) -> str | None:
        """The text of ``/proc/<pid>/fdinfo/<fd>``."""
        return read_text(f"{self._base}/fdinfo/{fd}")

    def writable(self, fd: int) -> bool:
        """True if ``fd`` was opened for writing (``O_WRONLY`` or ``O_RDWR``)."""
        info = self.info(fd)
        if info is None:
            return False
        for line in info.splitlines():
            if line.startswith("flags:"):
                try:
                    return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
                except (IndexError, ValueError):
                    return False
        return False

    def table(self) -> dict[str, list[int]] | None:
        """Every open descriptor, grouped by target; None if the table is unreadable."""
        if self._table is None:
            try:
                names = os.listdir(f"{self._base}/fd")
            except OSError:
                return None
            table: dict[str, list[int]] = {}
            for name in names:
                fd = int(name)
                target = self.link(fd)
                if target is not None:
                    table.setdefault(target, []).append(fd)
            self._table = table
        return self._table

    def memory(self, address: int, size: int) -> bytes | None:
        """``size`` bytes at ``address``; None on any failure or short read."""
        if size <= 0 or address <= 0 or address + size > 1 << 63:
            return None
        if self.kept is not None:
            return self.kept.memory(address, size)
        if self._mem is None:
            if self._mem_failed:
                return None
            try:
                self._mem = os.open(f"{self._base}/mem", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._mem_failed = True
                return None
        try:
            data = os.pread(self._mem, size, address)
        except (OSError, OverflowError):
            return None
        return data if len(data) == size else None


@attrs.frozen
class EpollEntry:
    """One watched descriptor of an epoll instance, as its ``fdinfo`` lists it."""

    fd: int
    events: int
    inode: int

    @property
    def armed(self) -> bool:
        """False for an entry that can no longer report anything (a fired one-shot)."""
        return bool(self.events & ~_EPOLL_FLAG_BITS)


def epoll_entries(info: str) -> list[EpollEntry] | None:
    """Parse an epoll ``fdinfo``; None if any ``tfd`` line is malformed.

    A line reads ``tfd:        0 events:       19 data: ... pos:0 ino:5 sdev:18``: the fd
    number in the registering process, the event mask and the target's inode (hex). The
    fd number can be stale (closed and reused while another copy keeps the file open),
    so callers compare ``inode`` with what the number refers to now.
    """
    entries: list[EpollEntry] = []
    for line in info.splitlines():
        if not line.startswith("tfd:"):
            continue
        fields = line.split()
        try:
            fd = int(fields[1])
            events = int(fields[fields.index("events:") + 1], 16)
            inode = next(int(f[4:], 16) for f in fields if f.startswith("ino:"))
        except (IndexError, ValueError, StopIteration):
            return None
        entries.append(EpollEntry(fd, events, inode))
    return entries
