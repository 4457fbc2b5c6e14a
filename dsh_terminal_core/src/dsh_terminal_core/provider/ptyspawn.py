"""Start a child on a fresh PTY through ptyprocess, and own nothing of ptyprocess after.

ptyprocess does the fork/exec dance well (exec errors come back through a pipe), but its
object owns the master through a file object, kills and sleeps in ``__del__`` and raises
bare builtins. This module takes the pid and a private duplicate of the master, disarms
the ptyprocess object, and turns every failure into ``TerminalError("SPAWN_FAILED")``
after killing and reaping any child that was forked, so a failed spawn leaves nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Mapping, Sequence

import attrs
from ptyprocess import PtyProcess

from ..errors import TerminalError

__all__ = ["SpawnedPty", "spawn_pty"]


@attrs.frozen(kw_only=True)
class SpawnedPty:
    """A child that has exec'd on a PTY; ``master_fd`` is non-blocking and close-on-exec."""

    pid: int
    master_fd: int


class _TrackedPty(PtyProcess):  # type: ignore[misc]
    """A PtyProcess that reports itself as soon as it exists.

    ``PtyProcess.spawn`` raises after the fork when exec fails, leaving the half-made
    instance (child and master) unreachable; recording it lets us clean up at once
    instead of waiting for the garbage collector.
    """

    _made = threading.local()

    def __init__(self, pid: int, fd: int) -> None:
        super().__init__(pid, fd)
        _TrackedPty._made.instance = self


def spawn_pty(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    rows: int,
    cols: int,
) -> SpawnedPty:
    """Fork and exec ``argv`` on a new PTY; the child leads a new session on it.

    The executable is resolved on the child's ``PATH``. Blocks only until the child has
    exec'd (ptyprocess waits on its exec-error pipe), a few milliseconds.

    Raises:
        TerminalError: ``SPAWN_FAILED`` when the executable is missing or not executable,
            ``cwd`` is unusable, or exec fails; no process or descriptor is left behind.
    """
    if not argv:
        raise TerminalError("cannot spawn a terminal: argv is empty", "SPAWN_FAILED")
    executable = _resolve(argv[0], env.get("PATH"))
    if cwd is not None and not os.path.isdir(cwd):
        raise TerminalError(
            f"cannot spawn {argv[0]!r}: working directory {cwd!r} is not an existing directory",
            "SPAWN_FAILED",
        )
    _TrackedPty._made.instance = None
    try:
        proc = _TrackedPty.spawn(
            [executable, *argv[1:]],
            env=dict(env),
            dimensions=(rows, cols),
            # chdir in preexec so a failure is reported through the exec-error pipe,
            # rather than raised inside the forked copy of this interpreter.
            preexec_fn=(lambda: os.chdir(cwd)) if cwd is not None else None,
        )
    except BaseException as exc:
        orphan = _TrackedPty._made.instance
        _TrackedPty._made.instance = None
        if orphan is not None:
            _discard(orphan)
        if not isinstance(exc, Exception):
            raise
        raise TerminalError(f"cannot spawn {argv[0]!r}: {exc}", "SPAWN_FAILED") from exc
    _TrackedPty._made.instance = None
    try:
        master = os.dup(proc.fd)  # non-inheritable, owned by us alone
    except OSError as exc:
        _discard(proc)
        raise TerminalError(f"cannot spawn {argv[0]!r}: {exc}", "SPAWN_FAILED") from exc
    _disarm(proc)
    os.set_blocking(master, False)
    return SpawnedPty(pid=proc.pid, master_fd=master)


def _resolve(command: str, path: str | None) -> str:
    if os.sep in command:
        if os.path.isfile(command) and os.access(command, os.X_OK):
            return command
        raise TerminalError(f"cannot spawn {command!r}: no such executable file", "SPAWN_FAILED")
    found = shutil.which(command, path=path if path is not None else os.defpath)
    if found is None:
        raise TerminalError(
            f"cannot spawn {command!r}: not found on PATH or not executable", "SPAWN_FAILED"
        )
    return found


def _disarm(proc: PtyProcess) -> None:
    """Close ptyprocess's file object and make its ``__del__`` a no-op."""
    with contextlib.suppress(OSError):
        proc.fileobj.close()
    proc.closed = True


def _discard(proc: PtyProcess) -> None:
    """Kill and reap a child whose spawn failed; close its master."""
    _disarm(proc)
    with contextlib.suppress(OSError):
        os.kill(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(proc.pid, 0)
