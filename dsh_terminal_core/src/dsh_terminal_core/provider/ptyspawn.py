"""Start a child on a fresh PTY, off the event loop where the platform allows.

On Linux the fork server (``forkserver.py``) forks and execs the child, so the host's
event loop never stalls on a fork of its own large interpreter; the host receives the
master and a pidfd, and the server reaps the child when asked. Where the server cannot
run (no ``pidfd_open``, or it failed to start — said in the log), the child is forked
in-process through ptyprocess, which blocks the loop for the few milliseconds a fork and
exec take.

ptyprocess does the fork/exec dance well (exec errors come back through a pipe), but its
object owns the master through a file object, kills and sleeps in ``__del__`` and raises
bare builtins. The in-process path takes the pid and a private duplicate of the master,
disarms the ptyprocess object, and turns every failure into
``TerminalError("SPAWN_FAILED")`` after killing and reaping any child that was forked, so
a failed spawn leaves nothing.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import shutil
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

import attrs
from ptyprocess import PtyProcess

from ..kernel.errors import ErrorCode, TerminalError
from ..kernel.turns import loop_turn
from . import hostlimits
from .forkclient import encode_request, fork_server

__all__ = [
    "PtyChild",
    "SpawnedPty",
    "Spawner",
    "loop_turn",
    "spawn_pty",
    "spawn_pty_in_process",
]

_log = logging.getLogger(__name__)

Spawner = Literal["fork-server", "in-process"]
_JOIN = "cannot join the cgroup"


class PtyChild(Protocol):
    """Who reaps the PTY child: this process, or the fork server on its behalf."""

    async def reap(self) -> int | None:
        """Reap the exited child; return its raw wait status, None if it is lost."""
        ...

    def abandon(self) -> None:
        """SIGKILL and reap a child whose handle could not be built; idempotent."""
        ...


@attrs.frozen(kw_only=True)
class SpawnedPty:
    """A child that has exec'd on a PTY; ``master_fd`` is non-blocking and close-on-exec.

    ``pidfd`` is set when the child is not this process's own (fork server): it is the
    only race-free way to watch and signal it, and belongs to whoever takes it.
    """

    pid: int
    master_fd: int
    child: PtyChild
    pidfd: int | None = None


async def spawn_pty(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    rows: int,
    cols: int,
    spawner: Spawner = "fork-server",
    cgroups: Sequence[str] = (),
) -> SpawnedPty:
    """Start ``argv`` on a new PTY; the child leads a new session on it.

    ``cgroups``: the ``cgroup.procs`` files the child writes its pid into before it
    execs (its session's cgroups), so nothing it starts is ever outside them.

    The executable is resolved on the child's ``PATH``; ``cwd`` None means this process's
    current directory. With the fork server the loop only prepares a request (in its
    :func:`loop_turn`), sends it and receives the master; in-process
    (``spawner="in-process"`` or no server) the loop blocks until the child has exec'd.

    Raises:
        TerminalError: ``SPAWN_FAILED`` when the executable is missing or not executable,
            ``cwd`` is unusable, or exec fails; ``LIMITS_UNAVAILABLE`` when the child
            cannot join its cgroups; ``HOST_LIMIT`` when no descriptor,
            pseudo-terminal or process is left (see :mod:`.hostlimits`); no process or
            descriptor is left behind.
    """
    async with loop_turn():
        if spawner != "fork-server" or not _server_supported():
            return spawn_pty_in_process(
                argv, cwd=cwd, env=env, rows=rows, cols=cols, cgroups=cgroups
            )
        executable = _checked(argv, cwd, env)
        if cwd is None:
            try:
                cwd = os.getcwd()
            except OSError as exc:
                raise TerminalError(
                    f"cannot spawn {argv[0]!r}: the current directory is unusable: {exc}",
                    "SPAWN_FAILED",
                ) from exc
        request = encode_request(
            executable,
            [executable, *argv[1:]],
            cwd=cwd,
            env=env,
            rows=rows,
            cols=cols,
            nofile=hostlimits.child_open_file_limit(),
            cgroups=cgroups,
        )
    served = await fork_server().spawn(request, name=argv[0])
    if served is not None:
        return SpawnedPty(
            pid=served.pid, master_fd=served.master_fd, pidfd=served.pidfd, child=served
        )
    async with loop_turn():
        return spawn_pty_in_process(argv, cwd=cwd, env=env, rows=rows, cols=cols, cgroups=cgroups)


def prestart_server() -> None:
    """Start the fork server in the background now, so the first open need not wait."""
    if _server_supported():
        fork_server().prestart()


_supported: bool | None = None


def _server_supported() -> bool:
    """The fork server needs Linux and ``pidfd_open`` (exit events of a non-child)."""
    global _supported
    if _supported is None:
        _supported = False
        opener = getattr(os, "pidfd_open", None)
        if sys.platform.startswith("linux") and opener is not None:
            try:
                os.close(opener(os.getpid()))
                _supported = True
            except OSError as exc:
                _log.warning(
                    "pidfd_open is refused (%s); terminals are spawned in-process, "
                    "which blocks the event loop for each open",
                    exc,
                )
    return _supported


def _checked(argv: Sequence[str], cwd: str | None, env: Mapping[str, str]) -> str:
    if not argv:
        raise TerminalError("cannot spawn a terminal: argv is empty", "SPAWN_FAILED")
    executable = _resolve(argv[0], env.get("PATH"))
    if cwd is not None and not os.path.isdir(cwd):
        raise TerminalError(
            f"cannot spawn {argv[0]!r}: working directory {cwd!r} is not an existing directory",
            "SPAWN_FAILED",
        )
    return executable


@attrs.define
class _OwnChild:
    """A child of this process: reaped here."""

    pid: int

    async def reap(self) -> int | None:
        try:
            _, raw = os.waitpid(self.pid, 0)  # it has exited: this does not block
        except ChildProcessError:
            return None
        return raw

    def abandon(self) -> None:
        # Unreaped, so the pid and the group it leads are still ours (see ServedChild).
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


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


def spawn_pty_in_process(
    argv: Sequence[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    rows: int,
    cols: int,
    cgroups: Sequence[str] = (),
) -> SpawnedPty:
    """Fork and exec ``argv`` on a new PTY from this process (blocks the calling thread).

    Blocks until the child has exec'd (ptyprocess waits on its exec-error pipe): the fork
    copies this interpreter's page tables while holding the GIL, 10-26 ms for a large
    host process. Raises like :func:`spawn_pty`.
    """
    executable = _checked(argv, cwd, env)
    nofile = hostlimits.child_open_file_limit()

    def prepare_child() -> None:
        # In preexec so a failure is reported through the exec-error pipe, rather than
        # raised inside the forked copy of this interpreter.
        for procs in cgroups:
            try:
                fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, str(os.getpid()).encode())
                finally:
                    os.close(fd)
            except OSError as exc:
                where = os.path.dirname(procs)
                raise OSError(exc.errno, f"{_JOIN} {where}: {exc.strerror}") from None
        if cwd is not None:
            os.chdir(cwd)
        if nofile is not None:
            _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            limit = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))

    _TrackedPty._made.instance = None
    try:
        proc = _TrackedPty.spawn(
            [executable, *argv[1:]],
            env=dict(env),
            dimensions=(rows, cols),
            preexec_fn=(
                prepare_child if cwd is not None or nofile is not None or cgroups else None
            ),
        )
    except BaseException as exc:
        orphan = _TrackedPty._made.instance
        _TrackedPty._made.instance = None
        if orphan is not None:
            _discard(orphan)
        if not isinstance(exc, Exception):
            raise
        if _JOIN in str(exc):
            raise TerminalError(
                f"cannot start {argv[0]!r} in its session's cgroup: {exc}",
                ErrorCode.LIMITS_UNAVAILABLE,
            ) from exc
        limit = _in_process_limit(exc, argv[0], forked=orphan is not None)
        if limit is not None:
            raise limit from exc
        raise TerminalError(f"cannot spawn {argv[0]!r}: {exc}", "SPAWN_FAILED") from exc
    _TrackedPty._made.instance = None
    try:
        master = os.dup(proc.fd)  # non-inheritable, owned by us alone
    except OSError as exc:
        _discard(proc)
        limit = hostlimits.open_file_limit_error(exc.errno or 0, argv[0])
        if limit is not None:
            raise limit from exc
        raise TerminalError(f"cannot spawn {argv[0]!r}: {exc}", "SPAWN_FAILED") from exc
    _disarm(proc)
    os.set_blocking(master, False)
    return SpawnedPty(pid=proc.pid, master_fd=master, child=_OwnChild(proc.pid))


def _in_process_limit(exc: Exception, name: str, *, forked: bool) -> TerminalError | None:
    """``HOST_LIMIT`` for a failed ptyprocess spawn, where its errno says so.

    ptyprocess allocates the PTY and forks in one call (``pty.fork``): an EAGAIN before
    any child exists is the PTY's when every pseudo-terminal is taken, else the fork's.
    """
    code = getattr(exc, "errno", None)
    if not isinstance(code, int):
        return None
    if forked:
        stage = "exec"
    elif code == errno.ENOSPC or (code == errno.EAGAIN and hostlimits.ptys_exhausted()):
        stage = "pty"
    else:
        stage = "fork"
    return hostlimits.spawn_limit(code, stage, name)


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
        os.killpg(proc.pid, signal.SIGKILL)  # the group it leads, if it got that far
    with contextlib.suppress(OSError):
        os.kill(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(proc.pid, 0)
