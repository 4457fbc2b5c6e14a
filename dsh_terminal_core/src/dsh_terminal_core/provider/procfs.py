"""Small, allocation-light readers for Linux ``/proc``.

The inspector runs on the readiness hot path, so it reads ``/proc/<pid>/stat`` directly
instead of building psutil objects. Every reader returns None (or skips the entry) when
the process vanished or the file is unreadable; callers treat that as "unknown".
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import attrs

__all__ = ["ProcStat", "iter_pids", "last_pid", "read_bytes", "read_stat", "read_text"]

PROC = "/proc"
_READ_SIZE = 4096


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
    raw = read_bytes(f"{proc}/{pid}/stat")
    if raw is None:
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


def read_bytes(path: str, limit: int | None = None) -> bytes | None:
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


def read_text(path: str) -> str | None:
    """:func:`read_bytes` decoded as ASCII (``/proc`` text), None on failure."""
    data = read_bytes(path)
    return data.decode("ascii", "replace") if data is not None else None


def last_pid(proc: str = PROC) -> int | None:
    """The pid most recently handed out (the last field of ``/proc/loadavg``).

    Pids are allocated in increasing order, so while this number stands still no process
    has been created anywhere: facts about who holds which file cannot have spread.
    """
    raw = read_bytes(f"{proc}/loadavg")
    if raw is None:
        return None
    try:
        return int(raw.split()[-1])
    except (IndexError, ValueError):
        return None


def forks_since_boot(proc: str = PROC) -> int | None:
    """Processes and threads created since boot (``processes`` in ``/proc/stat``).

    Each one took a pid, so the difference of two readings bounds how far the pid
    counter can have moved, and whether it can have come all the way around.
    """
    raw = read_bytes(f"{proc}/stat")
    if raw is None:
        return None
    start = raw.find(b"\nprocesses ")
    if start < 0:
        return None
    start += len(b"\nprocesses ")
    end = raw.find(b"\n", start)
    try:
        return int(raw[start : end if end >= 0 else len(raw)])
    except ValueError:
        return None


def pid_max(proc: str = PROC) -> int | None:
    """The pid counter wraps back to 300 after this value (``kernel.pid_max``)."""
    raw = read_bytes(f"{proc}/sys/kernel/pid_max")
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None
