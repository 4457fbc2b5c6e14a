"""The teardown's fallback without cgroups: a closed terminal's escaped processes, found
below the fork server by the tag in their environment.

Where no cgroup holds a session (``cgroups = "off"``, a host or container that gives no
cgroup access, a world agent, which loads no owner limits), the process tree walk cannot
see what left the terminal's session and tree: a ``setsid`` daemon whose parent exited,
a double fork. Those are orphans, and the fork server is a child subreaper
(:mod:`.forkserver`): the kernel reparents them to it rather than to init (in a container
the world daemon is PID 1, which would keep them for good). Every terminal's environment
carries a tag of its own (:data:`TAG_VARIABLE`, inherited by everything it starts), so
after the tree walk the teardown reads the processes the fork server adopted, and each
one whose environment carries the closed terminal's tag is stopped with its whole
subtree (a stopped process cannot fork) and then killed, round after round until none is
left (a killed parent's children are adopted in turn). A process of the subtree below a
tagged one goes with it, tagged or not.

What this cannot reach, unlike a cgroup: a process that re-execs itself with its
environment cleared (``env -i``) before it is orphaned, or with the tag changed; and the
orphans of a spawn made without the fork server (the in-process spawner), which go to
init. Signals go through a pidfd
opened before the environment is read again, so a pid reused by a stranger meanwhile is
never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import signal
import time

from ..kernel.errors import ErrorCode, TerminalError
from .cgroups import still_running
from .forkclient import fork_server, serving

__all__ = ["TAG_VARIABLE", "new_tag", "sweep", "sweep_orphans", "tagged"]

TAG_VARIABLE = "DSH_TERMINAL_TAG"
"""The variable whose value names a terminal's processes (``<host pid>.<n>``)."""

_tags = itertools.count(1)
_FIRST_POLL_S = 0.001
_MAX_POLL_S = 0.02


def new_tag() -> str:
    """A tag no other terminal of this host process carries."""
    return f"{os.getpid()}.{next(_tags)}"


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as file:
                found += [int(word) for word in file.read().split()]
        except (OSError, ValueError):
            continue
    return found


def _carries(pid: int, entry: bytes) -> bool:
    """True when ``pid``'s environment holds ``entry`` (``NAME=value``); False for a
    zombie, a process gone, or one whose environment cannot be read."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return entry in file.read().split(b"\0")
    except OSError:
        return False


def tagged(root: int, tag: str, live: frozenset[int] = frozenset()) -> list[int]:
    """The processes ``root`` adopted that carry ``tag``, each with its whole subtree,
    parents before their children.

    ``root``'s children in ``live`` (its live terminals, whose trees their own teardown
    owns) are not read: a close reads the environment of the adopted processes only, not
    of every terminal's shell.
    """
    entry = f"{TAG_VARIABLE}={tag}".encode()
    found: list[int] = []
    pending = [pid for pid in _children(root) if pid not in live and _carries(pid, entry)]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending += _children(pid)
    return found


def _signal_round(root: int, tag: str, signalled: list[int]) -> bool:
    """Stop, then SIGKILL, everything of the tag below ``root``; False when none was left.
    The pidfds of the processes signalled are added to ``signalled`` (the caller's).

    Each pid's pidfd is opened first and its membership read afterwards, so the signal
    reaches the process that was read, never a stranger given its pid since.
    """
    fds: list[int] = []
    live = serving()
    for pid in tagged(root, tag, live):
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(pid))
    if not fds:
        return False
    still = set(tagged(root, tag, live))
    targets = [fd for fd in fds if _pid_of(fd) in still]
    for fd in fds:
        if fd not in targets:
            os.close(fd)
    for signum in (signal.SIGSTOP, signal.SIGKILL):
        for fd in targets:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signum)
    signalled += targets
    return True


def _pid_of(pidfd: int) -> int | None:
    """The pid a pidfd refers to (its ``Pid:`` line), None once the process is gone."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}", "rb") as file:
            for line in file:
                if line.startswith(b"Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError, IndexError):
        pass
    return None


async def sweep(root: int, tag: str, timeout: float) -> None:
    """Kill every process below ``root`` that carries ``tag`` (and its subtree), until
    none is left, and wait until each one killed has exited.

    Raises:
        TerminalError: ``TEARDOWN_FAILED`` when some are still there after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    signalled: list[int] = []
    try:
        delay = _FIRST_POLL_S
        while True:
            found = _signal_round(root, tag, signalled)
            signalled = still_running(signalled)
            if not found and not signalled:
                return
            if time.monotonic() >= deadline:
                left = sorted(set(tagged(root, tag)) | {_pid_of(fd) or 0 for fd in signalled})
                raise TerminalError(
                    "terminal teardown failed: processes of the closed terminal, orphaned "
                    f"out of its tree, survived SIGKILL: {', '.join(map(str, left))}",
                    ErrorCode.TEARDOWN_FAILED,
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_POLL_S)
    finally:
        for fd in signalled:
            os.close(fd)


async def sweep_orphans(tag: str, timeout: float) -> None:
    """:func:`sweep` below this host's fork server, where a terminal's orphans go; a
    no-op without a running server (its terminals were spawned in-process).

    Raises:
        TerminalError: ``TEARDOWN_FAILED`` as :func:`sweep`.
    """
    root = fork_server().pid
    if root is not None:
        await sweep(root, tag, timeout)
