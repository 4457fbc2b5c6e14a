"""The exact stdin-wait probe for Linux, read from ``/proc``.

A thread is "reading the terminal" only if ``/proc/<pid>/task/<tid>/syscall`` shows it
blocked in a call that waits for input on a descriptor referring to the session's PTY
slave:

* ``read``/``readv`` on such a descriptor;
* ``select``/``pselect6`` with its bit set in the read set (read from ``/proc/<pid>/mem``);
* ``poll``/``ppoll`` with a ``struct pollfd`` for it asking for ``POLLIN``/``POLLRDNORM``;
* ``epoll_wait``/``epoll_pwait``/``epoll_pwait2`` on an epoll instance whose
  ``/proc/<pid>/fdinfo`` lists it with ``EPOLLIN``/``EPOLLRDNORM``.

"Refers to the terminal" compares the descriptor's target (device, inode) with the
slave's, so fd 0 counts wherever devpts is mounted. ``getpass``, ``sudo`` and ``ssh`` open
``/dev/tty`` and read fd 3; that descriptor's link names the ``/dev/tty`` node itself (not
``/dev/pts/N``), and it counts when the reader's controlling terminal is the slave.

Every positive answer is confirmed by re-reading the syscall line: if the thread moved on
while its memory was read, the answer is False. Anything unreadable, any architecture
without a table and any non-64-bit process is a miss, never a guess.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import struct
from collections.abc import Iterable

from .inspector import TerminalIdentity
from .procfs import PROC, iter_pids, read_stat
from .syscalls import SyscallTable, Wait, current_table

__all__ = ["LinuxStdinProbe"]

_POLL_READ = 0x0001 | 0x0040  # POLLIN | POLLRDNORM
_EPOLL_READ = 0x0001 | 0x0040  # EPOLLIN | EPOLLRDNORM
_POLLFD = struct.Struct("<ihh")  # struct pollfd {int fd; short events; short revents;}
_MAX_POLLFDS = 65536  # bounds one memory read; larger arrays are not inspected past it
_MAX_SELECT_FDS = 1 << 20
_ELF64_HEADER = b"\x7fELF\x02"
_DEV_TTY = os.makedev(5, 0)  # /dev/tty: "my controlling terminal"
_ELF_CACHE_MAX = 256
_READ_SIZE = 4096
_VOLUNTARY = "\nvoluntary_ctxt_switches:"


class LinuxStdinProbe:
    """Exact probe over ``/proc``; ``table`` None (an unlisted architecture) means False."""

    def __init__(self, table: SyscallTable | None = None, proc: str = PROC) -> None:
        self._table = table if table is not None else current_table()
        self._proc = proc
        self._elf64: dict[tuple[int, int, int], bool] = {}

    def terminal_of(self, master_fd: int) -> TerminalIdentity | None:
        """Identify the slave of ``master_fd`` without depending on where devpts is mounted.

        Opens the peer with ``TIOCGPTPEER`` (Linux 4.13+) just long enough to ``fstat`` it;
        falls back to ``TIOCGPTN`` and ``/dev/pts/<n>``.
        """
        if self._table is None:
            return None
        number = _pty_number(master_fd, self._table.tiocgptn)
        path = f"/dev/pts/{number}" if number is not None else "/dev/pts/?"
        flags = os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC
        try:
            peer = fcntl.ioctl(master_fd, self._table.tiocgptpeer, flags)
        except OSError:
            peer = -1
        try:
            st = os.fstat(peer) if peer >= 0 else os.stat(path)
        except OSError:
            return None
        finally:
            if peer >= 0:
                os.close(peer)
        return TerminalIdentity(device=st.st_dev, inode=st.st_ino, rdev=st.st_rdev, path=path)

    def process_reading(self, pid: int, terminal: TerminalIdentity) -> bool:
        """Return True only if some thread of ``pid`` is blocked reading ``terminal``."""
        return self._process_wait(pid, terminal, count=False) is not None

    def group_wait(self, pgid: int, terminal: TerminalIdentity) -> int | None:
        """Return the wake count if some member of ``pgid`` is reading ``terminal``, else None.

        The group leader is tried first because it is usually the one reading; the rest
        of the group costs one scan of ``/proc``, in pid order.
        """
        if self._table is None or pgid <= 0:
            return None
        found = self._process_wait(pgid, terminal, count=True)
        if found is not None:
            return found
        for pid in sorted(self._members(pgid)):
            found = self._process_wait(pid, terminal, count=True)
            if found is not None:
                return found
        return None

    def _process_wait(self, pid: int, terminal: TerminalIdentity, *, count: bool) -> int | None:
        """Summed voluntary switches of ``pid``'s threads reading ``terminal`` (0 unless
        ``count``), or None if none is reading."""
        if self._table is None or not self._is_64bit(pid):
            return None
        try:
            tids = os.listdir(f"{self._proc}/{pid}/task")
        except OSError:
            return None
        wakes: int | None = None
        for tid in tids:
            if self._thread_reading(pid, tid, terminal):
                if not count:
                    return 0
                wakes = (wakes or 0) + self._voluntary_switches(pid, tid)
        return wakes

    def _members(self, pgid: int) -> Iterable[int]:
        for pid in iter_pids(self._proc):
            if pid == pgid:
                continue
            stat = read_stat(pid, self._proc)
            if stat is not None and stat.pgrp == pgid:
                yield pid

    def _voluntary_switches(self, pid: int, tid: str) -> int:
        status = _read_text(f"{self._proc}/{pid}/task/{tid}/status")
        if status is not None:
            start = status.find(_VOLUNTARY)
            if start >= 0:
                start += len(_VOLUNTARY)
                end = status.find("\n", start)
                with contextlib.suppress(ValueError):
                    return int(status[start : end if end >= 0 else len(status)])
        return 0

    def _is_64bit(self, pid: int) -> bool:
        # A 32-bit (compat) process reports syscall numbers from another table. The
        # answer belongs to the executable, so it is remembered per file: one stat per
        # probe instead of reading the ELF header every time.
        path = f"{self._proc}/{pid}/exe"
        try:
            st = os.stat(path)
        except OSError:
            return False
        key = (st.st_dev, st.st_ino, st.st_mtime_ns)
        known = self._elf64.get(key)
        if known is None:
            header = _read_bytes(path, 5)
            if header is None:
                return False
            known = header[:5] == _ELF64_HEADER
            if len(self._elf64) >= _ELF_CACHE_MAX:
                self._elf64.clear()
            self._elf64[key] = known
        return known

    def _thread_reading(self, pid: int, tid: str, terminal: TerminalIdentity) -> bool:
        assert self._table is not None
        path = f"{self._proc}/{pid}/task/{tid}/syscall"
        line = _read_text(path)
        if line is None:
            return False
        parsed = _parse_syscall(line)
        if parsed is None:
            return False
        number, args = parsed
        wait = self._table.waits.get(number)
        if wait is None:
            return False
        if wait is Wait.READ:
            hit = self._refers(pid, args[0], terminal)
        elif wait is Wait.SELECT:
            hit = self._select_hit(pid, args[0], args[1], terminal)
        elif wait is Wait.POLL:
            hit = self._poll_hit(pid, args[0], args[1], terminal)
        else:
            hit = self._epoll_hit(pid, args[0], terminal)
        # The thread may have returned and re-entered elsewhere while we looked.
        return hit and _read_text(path) == line

    def _refers(self, pid: int, fd: int, terminal: TerminalIdentity) -> bool:
        if fd < 0 or fd > 0x7FFFFFFF:
            return False
        try:
            st = os.stat(f"{self._proc}/{pid}/fd/{fd}")
        except OSError:
            return False
        if (st.st_dev, st.st_ino) == (terminal.device, terminal.inode):
            return True
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == _DEV_TTY:
            ctty = read_stat(pid, self._proc)
            return ctty is not None and ctty.tty_nr != 0 and ctty.tty_nr == terminal.rdev
        return False

    def _select_hit(self, pid: int, nfds: int, readfds: int, terminal: TerminalIdentity) -> bool:
        if readfds == 0 or nfds <= 0:
            return False
        nfds = min(nfds, _MAX_SELECT_FDS)
        bitmap = _read_memory(self._proc, pid, readfds, (nfds + 7) // 8)
        if bitmap is None:
            return False
        # Both supported architectures are little-endian: bit n is byte n//8, bit n%8.
        for index, byte in enumerate(bitmap):
            while byte:
                low = byte & -byte
                fd = index * 8 + low.bit_length() - 1
                byte ^= low
                if fd < nfds and self._refers(pid, fd, terminal):
                    return True
        return False

    def _poll_hit(self, pid: int, fds: int, nfds: int, terminal: TerminalIdentity) -> bool:
        if fds == 0 or nfds <= 0:
            return False
        count = min(nfds, _MAX_POLLFDS)
        raw = _read_memory(self._proc, pid, fds, count * _POLLFD.size)
        if raw is None:
            return False
        seen: set[int] = set()
        for fd, events, _revents in _POLLFD.iter_unpack(raw):
            if fd >= 0 and events & _POLL_READ and fd not in seen:
                seen.add(fd)
                if self._refers(pid, fd, terminal):
                    return True
        return False

    def _epoll_hit(self, pid: int, epfd: int, terminal: TerminalIdentity) -> bool:
        info = _read_text(f"{self._proc}/{pid}/fdinfo/{epfd}")
        if info is None:
            return False
        for line in info.splitlines():
            # "tfd:        0 events:       19 data: ... pos:0 ino:5 sdev:18"
            if not line.startswith("tfd:"):
                continue
            fields = line.split()
            try:
                fd = int(fields[1])
                events = int(fields[fields.index("events:") + 1], 16)
            except (IndexError, ValueError):
                continue
            if events & _EPOLL_READ and self._refers(pid, fd, terminal):
                return True
        return False


def _pty_number(master_fd: int, request: int) -> int | None:
    try:
        raw = fcntl.ioctl(master_fd, request, b"\0\0\0\0")
    except OSError:
        return None
    return int(struct.unpack("I", raw)[0])


def _read_bytes(path: str, limit: int | None = None) -> bytes | None:
    """Read a small file (at most ``limit`` bytes) with bare system calls; None on failure.

    ``/proc`` files are read on every readiness probe, so this skips the buffered file
    object (and its extra ``fstat``/``ioctl``/``lseek`` calls): a read shorter than
    asked for is the end of a ``/proc`` file, so a small file costs open, read, close.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        size = limit if limit is not None else _READ_SIZE
        data = os.read(fd, size)
        if limit is None and len(data) == size:
            parts = [data]
            while True:
                more = os.read(fd, _READ_SIZE)
                if not more:
                    break
                parts.append(more)
            data = b"".join(parts)
        return data
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_text(path: str) -> str | None:
    data = _read_bytes(path)
    return data.decode("ascii", "replace") if data is not None else None


def _parse_syscall(line: str) -> tuple[int, list[int]] | None:
    """Parse ``nr arg0..arg5 sp pc``; None when running, not in a syscall, or malformed."""
    fields = line.split()
    if len(fields) < 7 or fields[0] == "running":
        return None
    try:
        number = int(fields[0])
        args = [int(field, 16) for field in fields[1:7]]
    except ValueError:
        return None
    if number < 0:
        return None
    return number, args


def _read_memory(proc: str, pid: int, address: int, size: int) -> bytes | None:
    """Read ``size`` bytes at ``address`` of ``pid``; None on any failure or short read."""
    if size <= 0 or address <= 0 or address + size > 1 << 63:
        return None
    try:
        fd = os.open(f"{proc}/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        data = os.pread(fd, size, address)
    except (OSError, OverflowError):
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return data if len(data) == size else None
