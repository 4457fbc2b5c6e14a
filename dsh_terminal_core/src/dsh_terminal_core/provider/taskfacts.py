"""Facts about a process that readiness compares over time, read from ``/proc``.

* ``wake_count``: a count that moves whenever its main thread runs: the CPU time in its
  scheduler statistics (nanoseconds) plus their count of time slices, or its voluntary
  context switches where the kernel keeps no such statistics. A process blocked in a
  read wait has the same count until it wakes; a process seen blocked now whose count
  moved since an earlier look ran in between, so the wait it is in began after that
  look. Neither half would do alone. The time slices move when a thread is switched
  in, so a thread already running at the first look that then blocked leaves them
  unchanged, while its CPU time moves. The CPU time is the run queue's task clock,
  which in a virtual machine leaves out time the host stole from the CPU: after a
  steal, that clock stands still until the stolen time is paid back, and a shell can
  wake, run a command and block again with no CPU time added; its time slices move.
  Both counters only grow, so their sum moves exactly when either does.
* ``executable_id``: the (device, inode) of its executable, to tell whether a process is
  another instance of a given program (a shell started inside the shell).

* ``run_stamp``: something that changes whenever a single-threaded process runs (its
  scheduler statistics), so a wait proven once is known to be the same wait later
  without looking at the process's system call again (``ran_since`` compares).
* ``sole_member``: whether a process group provably holds its leader alone, so no
  other member can still be writing output after the leader was seen waiting.
* ``busy_ns_in`` and ``reaped_cpu``: how long a polling program was busy between two
  looks, so an idle poller (``top``) can be told from one working between its key
  polls: the time its thread ran or waited for a CPU to run on, exact, from the run
  stamp, and the CPU time of the children it reaped (they may have done its work), in
  clock ticks. Waiting for a CPU counts as busy: on a loaded machine a program that
  works between its polls gets less CPU time per second, but wants as much of it.
* ``write_calls``: how many ``write``-family calls a process has made, so a poller
  that has not drawn anything yet is not taken for one idling at its first frame.

Each returns None when the process is gone or unreadable, and everywhere but Linux.
"""

from __future__ import annotations

import os

from .procfiles import KeptFiles
from .procfs import read_bytes, read_stat
from .syscalls import Wait, current_table

__all__ = [
    "busy_ns_in",
    "executable_id",
    "quietly_asleep",
    "ran_since",
    "reaped_cpu",
    "run_stamp",
    "sole_member",
    "wake_count",
    "wakes_in",
    "write_calls",
]

_VOLUNTARY = b"\nvoluntary_ctxt_switches:"
# /proc/<pid>/status is about 1.5 KiB; one read of this size takes it whole.
_STATUS_LIMIT = 8192


def wake_count(pid: int, kept: KeptFiles | None = None) -> int | None:
    """Return ``pid``'s wake count (see the module docstring), or None if unreadable.

    ``kept``: files held open, read instead of opening them when they are ``pid``'s
    (another process's are ignored, here and in :func:`run_stamp` and :func:`ran_since`).
    """
    stamp = _schedstat(pid, kept)
    if stamp:
        return wakes_in(stamp)
    data = read_bytes(f"/proc/{pid}/status", _STATUS_LIMIT)
    if data is None:
        return None
    start = data.find(_VOLUNTARY)
    return wakes_in(data[start + 1 :]) if start >= 0 else None


def wakes_in(stamp: bytes) -> int | None:
    """The wake count inside a run stamp: the scheduler statistics' CPU time plus their
    time slices, or the voluntary switches of a ``voluntary_ctxt_switches:`` line."""
    try:
        if stamp.startswith(_VOLUNTARY[1:]):
            end = stamp.find(b"\n")
            return int(stamp[len(_VOLUNTARY) - 1 : end if end >= 0 else len(stamp)])
        fields = stamp.split()
        if len(fields) < 3:
            return None
        return int(fields[0]) + int(fields[2])
    except ValueError:
        return None


def busy_ns_in(stamp: bytes) -> int | None:
    """The time (nanoseconds) a thread spent running or runnable, from a run stamp taken
    from the scheduler statistics; None for a ``voluntary_ctxt_switches:`` stamp, which
    holds neither."""
    fields = stamp.split()
    if len(fields) < 2 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    return int(fields[0]) + int(fields[1])


def reaped_cpu(pid: int, proc: str = "/proc") -> tuple[int, int] | None:
    """``pid``'s start time and the CPU time of the children it has reaped, both in
    clock ticks (``starttime``, ``cutime`` + ``cstime`` of ``/proc/<pid>/stat``)."""
    raw = read_bytes(f"{proc}/{pid}/stat")
    if raw is None:
        return None
    close = raw.rfind(b")")
    fields = raw[close + 2 :].split() if close >= 0 else []
    try:
        return int(fields[19]), int(fields[13]) + int(fields[14])
    except (IndexError, ValueError):
        return None


def write_calls(pid: int, proc: str = "/proc") -> int | None:
    """The ``write``-family system calls ``pid`` has made (``syscw`` of ``/proc/<pid>/io``,
    counted from its fork, so its parent's writes are not in it); None if unreadable."""
    raw = read_bytes(f"{proc}/{pid}/io")
    start = raw.find(b"syscw:") if raw is not None else -1
    if raw is None or start < 0:
        return None
    end = raw.find(b"\n", start)
    try:
        return int(raw[start + len(b"syscw:") : end if end >= 0 else len(raw)])
    except ValueError:
        return None


def executable_id(pid: int) -> tuple[int, int] | None:
    """Return the (device, inode) of ``pid``'s executable, or None if unreadable."""
    try:
        st = os.stat(f"/proc/{pid}/exe")
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def in_plain_read(pid: int) -> bool:
    """True if ``pid``'s main thread is blocked in a plain ``read``/``readv`` right now.

    A shell whose line editor waits in ``poll`` and then reads the byte it was told of
    sits in such a read only when that byte vanished in between (a cancel flushed the
    terminal's input): there fish holds a SIGINT until a byte arrives. False when unknown.
    """
    table = current_table()
    line = read_bytes(f"/proc/{pid}/syscall")
    if table is None or not line:
        return False
    try:
        number = int(line.split(maxsplit=1)[0])
    except ValueError:
        return False  # "running", or a task not in a call
    call = table.waits.get(number)
    return call is not None and call.kind is Wait.READ


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


def run_stamp(pid: int, kept: KeptFiles | None = None) -> bytes | None:
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
    return _schedstat(pid, kept)


def ran_since(pid: int, stamp: bytes, kept: KeptFiles | None = None) -> bool:
    """Whether ``pid``, single-threaded when its run stamp ``stamp`` was read, ran since.

    Unlike :func:`run_stamp` this needs no thread count: a thread made since would have
    been made by the one thread there was, which then ran and moved the stamp. True when
    the stamp cannot be read (the process is gone): "did not run" must be proven.
    """
    return _schedstat(pid, kept) != stamp


def _schedstat(pid: int, kept: KeptFiles | None) -> bytes | None:
    if kept is not None and kept.pid == pid:
        return kept.read("schedstat")
    return read_bytes(f"/proc/{pid}/schedstat", 256) or None


def sole_member(pgid: int) -> bool:
    """True only if process group ``pgid`` provably consists of its leader alone.

    The leader has no children (no thread of it lists any), and no other child of the
    leader's parent is in the group: a pipeline's members are siblings forked by the
    shell, and a program's helpers are its children. False whenever anything is
    unreadable (``/proc/<pid>/task/<tid>/children`` needs ``CONFIG_PROC_CHILDREN``).
    """
    leader = read_stat(pgid)
    if leader is None or leader.pgrp != pgid:
        return False
    own = _children(pgid)
    if own is None or own:
        return False
    siblings = _children(leader.ppid)
    if siblings is None:
        return False
    for sibling in siblings:
        if sibling != pgid:
            stat = read_stat(sibling)
            if stat is None or stat.pgrp == pgid:
                return False
    return True


def _children(pid: int) -> list[int] | None:
    """The children of every thread of ``pid``; None when unreadable."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    children: list[int] = []
    for tid in tids:
        listed = read_bytes(f"/proc/{pid}/task/{tid}/children")
        if listed is None:
            return None
        children.extend(int(child) for child in listed.split())
    return children
