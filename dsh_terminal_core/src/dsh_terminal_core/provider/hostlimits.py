"""The host's limits a terminal open can meet, raised where the process may, named where not.

A thousand terminals meet limits of the machine on the way (SPEC §24): descriptors (each
terminal holds about three in the harness — its PTY master, a pidfd and its fork-server
connection — and up to four more kept ``/proc`` files once it answered a send), processes
(one per shell, three under bubblewrap) and pseudo-terminals (``kernel.pty.max``).

* The soft ``RLIMIT_NOFILE`` is raised to the hard limit once, when the first provider is
  made (:func:`raise_open_file_limit`); the shells still start with the soft limit the
  harness was given (:func:`child_open_file_limit`), so their programs see an ordinary
  terminal process.
* An open that meets a limit is refused with ``HOST_LIMIT`` (:func:`spawn_limit`), whose
  message names the limit, its value, and how an operator raises it — never
  ``SPAWN_FAILED`` or ``INTERNAL``, and never a half-made session: whatever the open had
  started is killed and closed before the error is raised.
* An open is refused while fewer than :data:`DESCRIPTOR_HEADROOM` descriptors would be
  left once it and the opens still in flight took theirs
  (:func:`check_descriptor_headroom`), so the sessions already open keep the few a look
  at their shell, a check of what runs in it, or a close needs: at the limit itself those
  looks fail and their sends could only settle by silence.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import threading

from ..kernel.errors import ErrorCode, TerminalError

__all__ = [
    "DESCRIPTORS_PER_OPEN",
    "DESCRIPTOR_HEADROOM",
    "check_descriptor_headroom",
    "child_open_file_limit",
    "descriptor_limit",
    "descriptor_shortage",
    "open_file_limit_error",
    "ptys_exhausted",
    "raise_open_file_limit",
    "spawn_limit",
]

DESCRIPTOR_HEADROOM = 32
"""Descriptors an open leaves free for the sessions already open (looks, closes)."""
DESCRIPTORS_PER_OPEN = 4
"""What an open in flight may still take: its connection, master, pidfd and a peer."""

_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
_PTY = frozenset({errno.ENOSPC, errno.EAGAIN})
_PROCESSES = frozenset({errno.EAGAIN})

_lock = threading.Lock()
_raised = False
_given_soft: int | None = None  # the soft limit before it was raised; None: unchanged


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit, once per process; return both.

    A failure leaves the limit as it was (the opens then meet it as ``HOST_LIMIT``).
    """
    global _raised, _given_soft
    with _lock:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if not _raised:
            _raised = True
            if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
                with contextlib.suppress(OSError, ValueError):
                    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
                    _given_soft, soft = soft, hard
        return soft, hard


def child_open_file_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE`` a shell starts with: the one the harness was given.

    None when the harness did not change it (the child inherits it as it is).
    """
    return _given_soft


def descriptor_limit() -> int | None:
    """This process's soft ``RLIMIT_NOFILE`` now; None when unlimited or unknown."""
    try:
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY else soft


def check_descriptor_headroom(name: str, in_flight: int = 1) -> None:
    """Refuse an open (``HOST_LIMIT``) unless :data:`DESCRIPTOR_HEADROOM` descriptors stay
    free after ``in_flight`` opens (this one included) took theirs; costs an ``open`` and
    a ``close``.

    Descriptors are handed out lowest first, so a probe numbered ``n`` means every one
    below it is taken: at most ``limit - n`` are free.
    """
    try:
        probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        error = open_file_limit_error(exc.errno or 0, name)
        if error is None:
            raise
        raise error from exc
    os.close(probe)
    limit = descriptor_limit()
    needed = DESCRIPTOR_HEADROOM + DESCRIPTORS_PER_OPEN * max(1, in_flight)
    if limit is not None and limit - probe < needed:
        free = max(0, limit - probe)
        raise _nofile(
            name,
            f"at most {free} descriptors are free, and an open leaves "
            f"{DESCRIPTOR_HEADROOM} to the sessions already open",
        )


def descriptor_shortage(name: str) -> TerminalError | None:
    """``HOST_LIMIT`` if no descriptor can be opened now, else None.

    For a step whose reader answers "unknown" on any error (a ``/proc`` read): whether it
    failed for want of a descriptor is asked afterwards.
    """
    try:
        probe = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        return open_file_limit_error(exc.errno or 0, name)
    os.close(probe)
    return None


def open_file_limit_error(code: int, name: str) -> TerminalError | None:
    """``HOST_LIMIT`` for a descriptor error (EMFILE, ENFILE); None for any other."""
    if code == errno.EMFILE:
        return _nofile(name, "this process reached it")
    if code == errno.ENFILE:
        return _file_max(name)
    return None


def spawn_limit(code: int, stage: str, name: str) -> TerminalError | None:
    """``HOST_LIMIT`` for ``code`` (an errno) met at ``stage`` of starting ``name``.

    Stages: ``"pty"`` (allocating the pseudo-terminal), ``"prepare"`` (a pipe, a socket,
    receiving descriptors), ``"fork"`` and ``"exec"``. None when the error is not a
    host limit (a missing executable, an unusable directory ...).
    """
    if code in _DESCRIPTORS:
        return open_file_limit_error(code, name)
    if stage == "pty" and code in _PTY:
        return _pty_max(name)
    if stage in ("fork", "exec") and code in _PROCESSES:
        return _processes(name)
    return None


def ptys_exhausted() -> bool:
    """True when every pseudo-terminal ``kernel.pty.max`` allows is taken."""
    (used,) = _sysctl_fields("/proc/sys/kernel/pty/nr", (0,))
    (maximum,) = _sysctl_fields("/proc/sys/kernel/pty/max", (0,))
    return used.isdigit() and maximum.isdigit() and int(used) >= int(maximum)


# -- messages -----------------------------------------------------------------------------

_TAIL = "; or close sessions that are no longer needed. The sessions already open keep working"


def _error(name: str, text: str) -> TerminalError:
    return TerminalError(
        f"cannot start {name!r} on a new terminal: {text}{_TAIL}", ErrorCode.HOST_LIMIT
    )


def _nofile(name: str, why: str) -> TerminalError:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = hard = -1
    return _error(
        name,
        f"the open-file limit RLIMIT_NOFILE (soft {_show(soft)}, hard {_show(hard)}) is "
        f"reached — {why}; each terminal holds about 3 descriptors in the harness, up to 7 "
        "once it has answered a send. The harness raises the soft limit to the hard one "
        "itself; raise the hard limit of the process that starts it (`ulimit -Hn <n>` as "
        "root, `LimitNOFILE=` in a systemd unit, `nofile` in /etc/security/limits.conf, "
        "`docker run --ulimit nofile=<n>:<n>`)",
    )


def _file_max(name: str) -> TerminalError:
    nr, maximum = _sysctl_fields("/proc/sys/fs/file-nr", (0, 2))
    return _error(
        name,
        f"the system's open-file table is full (fs.file-max {maximum}, {nr} in use); "
        "raise it with `sysctl -w fs.file-max=<n>` (kept in /etc/sysctl.d/)",
    )


def _pty_max(name: str) -> TerminalError:
    (maximum,) = _sysctl_fields("/proc/sys/kernel/pty/max", (0,))
    (used,) = _sysctl_fields("/proc/sys/kernel/pty/nr", (0,))
    return _error(
        name,
        f"no pseudo-terminal is free (kernel.pty.max {maximum}, {used} in use); raise it "
        "with `sysctl -w kernel.pty.max=<n>` (kept in /etc/sysctl.d/; in a container the "
        "`max=` option of its /dev/pts mount may be the limit)",
    )


def _processes(name: str) -> TerminalError:
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    except (OSError, ValueError):
        soft = hard = -1
    (pid_max,) = _sysctl_fields("/proc/sys/kernel/pid_max", (0,))
    (threads_max,) = _sysctl_fields("/proc/sys/kernel/threads-max", (0,))
    pids = _cgroup_pids_max()
    cgroup = f", the cgroup's pids.max {pids}" if pids is not None else ""
    return _error(
        name,
        f"no more processes can be started (RLIMIT_NPROC of this user: soft {_show(soft)}, "
        f"hard {_show(hard)}; kernel.pid_max {pid_max}, kernel.threads-max {threads_max}"
        f"{cgroup}); each terminal runs one process, three under bubblewrap, plus what runs "
        "in it. Raise the one reached: `ulimit -u <n>` (`LimitNPROC=`, `nproc` in "
        "/etc/security/limits.conf), `sysctl -w kernel.pid_max=<n>` or "
        "`kernel.threads-max=<n>`, or the cgroup's pids.max (`TasksMax=` in systemd, "
        "`docker run --pids-limit <n>`)",
    )


def _show(value: int) -> str:
    if value == resource.RLIM_INFINITY:
        return "unlimited"
    return "unknown" if value < 0 else str(value)


def _sysctl_fields(path: str, indices: tuple[int, ...]) -> tuple[str, ...]:
    try:
        with open(path, encoding="ascii") as handle:
            fields = handle.read().split()
        return tuple(fields[i] for i in indices)
    except (OSError, IndexError, ValueError):
        return tuple("unknown" for _ in indices)


def _cgroup_pids_max() -> str | None:
    """The pids.max of this process's cgroup (v2) when one is set; None otherwise."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                hierarchy, _, path = line.rstrip("\n").partition("::")
                if hierarchy == "0":
                    with open(f"/sys/fs/cgroup{path}/pids.max", encoding="ascii") as limit:
                        value = limit.read().strip()
                    return None if value == "max" else value
    except (OSError, ValueError):
        return None
    return None
