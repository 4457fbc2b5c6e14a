"""Host side of the fork server (see ``forkserver.py``): start it, ask it for terminals.

One server per host process, shared by every event loop in it. It is started on a
dedicated thread that lives as long as the process — never on an event loop, because
starting any process from a large interpreter stalls the thread that does it, and
because the server's ``PR_SET_PDEATHSIG`` fires when the thread that started it ends.

Each terminal gets its own connection to the server (an abstract unix socket, which only
this pid may use): the spawn request and its answer with the PTY master and a pidfd,
later the reap request and the exit status, then the connection closes. Everything on
the loop is a non-blocking socket operation of a few hundred bytes.

A server that dies is noticed (its reaper thread, or a refused connection) and the next
spawn starts another; a server that cannot start makes :meth:`ForkServer.spawn` answer
None for 30 s, so the caller falls back to spawning in-process, with a warning in the log.
"""

from __future__ import annotations

import array
import asyncio
import concurrent.futures
import contextlib
import errno
import json
import logging
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ..kernel.errors import ErrorCode, TerminalError
from ..kernel.turns import take_turn
from . import hostguard, hostlimits

__all__ = [
    "ForkServer",
    "ServedChild",
    "encode_request",
    "fork_server",
    "server_script",
    "serving",
]

_log = logging.getLogger(__name__)

_SERVER = Path(__file__).with_name("forkserver.py")
_READY_TIMEOUT_S = 10.0
_RETRY_AFTER_FAILURE_S = 30.0
_MAX_REPLY = 64 * 1024
_T = TypeVar("_T")
# What a connection to a server that died says; other errors do not condemn the server.
_SERVER_GONE = frozenset({errno.ECONNREFUSED, errno.ENOENT, errno.ECONNRESET, errno.EPIPE})


def server_script() -> Path:
    """Path of the fork server's script (how tests and tools recognise its process)."""
    return _SERVER


class _Launcher:
    """A daemon thread that runs jobs in order and never exits before the process does."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]
        self._jobs = queue.SimpleQueue()
        thread = threading.Thread(target=self._run, name="dsh-forkserver-launcher", daemon=True)
        thread.start()

    def submit(self, job: Callable[[], _T]) -> concurrent.futures.Future[_T]:
        future: concurrent.futures.Future[_T] = concurrent.futures.Future()
        self._jobs.put((job, future))
        return future

    def _run(self) -> None:
        while True:
            job, future = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # reported to whoever awaits the job
                future.set_exception(exc)


@attrs.frozen
class _Running:
    address: str
    process: subprocess.Popen[bytes]
    lifeline: socket.socket


class ForkServer:
    """The process-wide fork server; use :func:`fork_server` to get it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner_pid = os.getpid()
        self._launcher: _Launcher | None = None
        self._running: _Running | None = None
        self._launching: concurrent.futures.Future[str | None] | None = None
        self._unavailable_until = 0.0

    @property
    def pid(self) -> int | None:
        """The running server's pid, or None."""
        running = self._running
        return running.process.pid if running is not None else None

    def prestart(self) -> None:
        """Start the server in the background if it is not running; never waits."""
        self._ensure()

    async def spawn(self, request: bytes, *, name: str) -> ServedChild | None:
        """Ask the server to start a child (``request`` from :func:`encode_request`; ``name``
        names it in errors) on a new PTY; None if no server can run.

        A server found dead is replaced once, transparently.

        Raises:
            TerminalError: ``SPAWN_FAILED`` when the child could not exec (the server's
                reason: missing file, bad interpreter, unusable ``cwd``...) or the
                server died twice in a row while answering; ``HOST_LIMIT`` when this
                process or the server ran out of descriptors, or the server out of
                pseudo-terminals or processes. No child is left running either way.
        """
        payload = request
        loop = asyncio.get_running_loop()
        failure = ""
        for _ in range(2):
            ready = self._ensure()
            # A running server's address is at hand: no loop turn spent on the handoff.
            address = ready.result() if ready.done() else await asyncio.wrap_future(ready)
            if address is None:
                return None
            await take_turn()  # the request goes out in a step of its own
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            except OSError as exc:
                raise _limit_or(exc, name) from exc
            sock.setblocking(False)
            try:
                await loop.sock_connect(sock, address)
                await loop.sock_sendall(sock, payload)
                reply, fds = await _receive(loop, sock, in_turn=True)
            except OSError as exc:
                sock.close()  # the server SIGKILLs and reaps a child it could not hand over
                limit = hostlimits.open_file_limit_error(exc.errno or 0, name)
                if limit is not None:
                    raise limit from exc
                if exc.errno == errno.EMSGSIZE:
                    raise TerminalError(
                        f"cannot spawn {name!r}: argv and environment are too large "
                        f"({len(payload)} bytes)",
                        "SPAWN_FAILED",
                    ) from exc
                failure = str(exc) or type(exc).__name__
                if exc.errno in _SERVER_GONE:
                    self._forget(address)
                continue
            except BaseException:
                sock.close()  # the server SIGKILLs and reaps a child it cannot hand over
                raise
            return _served(sock, reply, fds, name)
        raise TerminalError(
            f"cannot spawn {name!r}: the terminal fork server died while answering ({failure})",
            "SPAWN_FAILED",
        )

    # -- lifecycle -------------------------------------------------------------------

    def _ensure(self) -> concurrent.futures.Future[str | None]:
        with self._lock:
            if self._owner_pid != os.getpid():
                self._after_fork()
            if self._running is not None:
                return _completed(self._running.address)
            if self._launching is not None:
                return self._launching
            if time.monotonic() < self._unavailable_until:
                return _completed(None)
            if self._launcher is None:
                self._launcher = _Launcher()
            self._launching = self._launcher.submit(self._launch)
            return self._launching

    def _after_fork(self) -> None:
        # A forked child must not keep its parent's server alive nor use it (the server
        # accepts only its host's pid): drop the inherited copy and start afresh.
        if self._running is not None:
            with contextlib.suppress(OSError):
                self._running.lifeline.close()
        self._owner_pid = os.getpid()
        self._launcher = None
        self._running = None
        self._launching = None
        self._unavailable_until = 0.0

    def _launch(self) -> str | None:
        """On the launcher thread: start a server and wait until it is ready."""
        try:
            running = _start_server()
        except OSError as exc:
            _log.warning(
                "terminal fork server could not start (%s); terminals are spawned in-process "
                "for the next %.0f s, which blocks the event loop for each open",
                exc,
                _RETRY_AFTER_FAILURE_S,
            )
            with self._lock:
                self._launching = None
                self._unavailable_until = time.monotonic() + _RETRY_AFTER_FAILURE_S
            return None
        with self._lock:
            self._running = running
            self._launching = None
        threading.Thread(
            target=self._watch, args=(running,), name="dsh-forkserver-reap", daemon=True
        ).start()
        # The host-death guardian is started here too, so no open starts it on a loop.
        hostguard.prestart()
        return running.address

    def _watch(self, running: _Running) -> None:
        code = running.process.wait()
        if self._forget(running.address):
            _log.info(
                "terminal fork server %d exited (%s); the next open starts another",
                running.process.pid,
                code,
            )

    def _forget(self, address: str) -> bool:
        """Drop the server at ``address`` if it is the current one; return whether it was."""
        with self._lock:
            running = self._running
            if running is None or running.address != address:
                return False
            self._running = None
        with contextlib.suppress(OSError):
            running.lifeline.close()  # a server that still lives sees EOF and exits
        return True


def encode_request(
    executable: str,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    rows: int,
    cols: int,
    nofile: int | None = None,
    cgroups: Sequence[str] = (),
) -> bytes:
    """The spawn request for :meth:`ForkServer.spawn`: exec ``executable`` with ``argv``.

    ``nofile``: the soft open-file limit the child starts with (None: the server's).
    ``cgroups``: the ``cgroup.procs`` files the child joins before it execs.
    """
    request: dict[str, Any] = {
        "executable": executable,
        "argv": list(argv),
        "cwd": cwd,
        "env": dict(env),
        "rows": rows,
        "cols": cols,
    }
    if nofile is not None:
        request["nofile"] = nofile
    if cgroups:
        request["cgroups"] = list(cgroups)
    return json.dumps(request).encode()


def _start_server() -> _Running:
    host = os.getpid()
    address = f"\0dsh-forkserver-{host}-{secrets.token_hex(8)}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    host_end, server_end = socket.socketpair()
    try:
        listener.bind(address)
        listener.listen(socket.SOMAXCONN)  # a full backlog would refuse a burst of opens
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_SERVER), str(host), str(server_end.fileno())],
            stdin=listener.fileno(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(server_end.fileno(),),
            close_fds=True,
            cwd="/",
            env={},  # it needs nothing, and must not look like one of the shells it starts
            process_group=0,  # terminal signals to the host's group are the host's business
        )
    except BaseException:
        host_end.close()
        raise
    finally:
        listener.close()
        server_end.close()
    host_end.settimeout(_READY_TIMEOUT_S)
    try:
        ready = host_end.recv(64)
    except OSError as exc:
        ready = b""
        reason = f"no answer: {exc}"
    else:
        reason = "it exited at start"
    if ready != b"ready\n":
        host_end.close()
        with contextlib.suppress(OSError):
            process.kill()
        process.wait()
        raise OSError(f"fork server {process.pid}: {reason}")
    host_end.setblocking(True)
    return _Running(address=address, process=process, lifeline=host_end)


@attrs.define(eq=False)
class ServedChild:
    """A terminal child started by the fork server, and the connection that owns it.

    ``pidfd`` and ``master_fd`` belong to whoever takes them. The server keeps the child
    unreaped (so its pid stays its own) until :meth:`reap`; :meth:`abandon` makes the
    server SIGKILL and reap it.
    """

    pid: int
    master_fd: int
    pidfd: int | None
    _sock: socket.socket | None

    async def reap(self) -> int | None:
        """Have the server reap the exited child; return its raw wait status.

        None when the status is lost (the server died, and init reaped the child).
        """
        sock = self._sock
        if sock is None:
            return None
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(sock, b'{"op": "reap"}')
            reply, fds = await _receive(loop, sock)
        except OSError as exc:
            _log.info("exit status of terminal child %d is lost: %s", self.pid, exc)
            return None
        finally:
            self._sock = None
            sock.close()
            _serving.discard(self.pid)
        for fd in fds:
            os.close(fd)
        status = reply.get("status")
        if not isinstance(status, int):
            _log.info("exit status of terminal child %d is lost: %s", self.pid, reply)
            return None
        return status

    def abandon(self) -> None:
        """Give the child up: the server SIGKILLs and reaps it, with its process group.
        Idempotent.

        The group is killed here too (the child leads it, and is not reaped while the
        connection is open, so the number is still its own): what the child started in
        its first moments — bubblewrap's pid 1, before it asked to die with its parent —
        goes with it.
        """
        sock, self._sock = self._sock, None
        if sock is None:
            return
        _serving.discard(self.pid)
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        if self.pidfd is not None:  # also reaches a child whose server already died
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        sock.close()


_serving: set[int] = set()
"""The pids of the server's children this process holds, unreaped (its live terminals)."""


def serving() -> frozenset[int]:
    """The fork server's terminal children this process has not had reaped or given up:
    among the server's children, every other one was adopted (see :mod:`.strays`)."""
    return frozenset(_serving)


def _served(sock: socket.socket, reply: dict[str, Any], fds: list[int], name: str) -> ServedChild:
    pid = reply.get("pid")
    if isinstance(pid, int) and fds:
        _serving.add(pid)
        return ServedChild(pid, fds[0], fds[1] if len(fds) > 1 else None, sock)
    sock.close()
    for fd in fds:
        os.close(fd)
    code, stage = reply.get("errno"), reply.get("stage")
    if stage == "cgroup":
        raise TerminalError(
            f"cannot start {name!r} in its session's cgroup: {reply.get('error')}",
            ErrorCode.LIMITS_UNAVAILABLE,
        )
    if isinstance(code, int) and isinstance(stage, str):
        limit = hostlimits.spawn_limit(code, stage, name)
        if limit is not None:
            raise limit
    reason = reply.get("error") or f"unexpected answer {reply!r}"
    raise TerminalError(f"cannot spawn {name!r}: {reason}", "SPAWN_FAILED")


def _limit_or(exc: OSError, name: str) -> BaseException:
    """``HOST_LIMIT`` for a descriptor error, else ``exc`` itself."""
    return hostlimits.open_file_limit_error(exc.errno or 0, name) or exc


async def _receive(
    loop: asyncio.AbstractEventLoop, sock: socket.socket, *, in_turn: bool = False
) -> tuple[dict[str, Any], list[int]]:
    """One message and the descriptors attached to it (close-on-exec).

    ``in_turn``: once the answer is there, it is taken in a turn of the opens (see
    ``turns``), so answers that arrive together are not all handled in one iteration.
    """
    while True:
        try:
            data, ancillary, flags, _ = sock.recvmsg(
                _MAX_REPLY, socket.CMSG_SPACE(2 * 4), socket.MSG_CMSG_CLOEXEC
            )
            break
        except (BlockingIOError, InterruptedError):
            await _readable(loop, sock.fileno())
            if in_turn:
                await take_turn()
    fds: list[int] = []
    for level, kind, blob in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.extend(array.array("i", blob[: len(blob) - len(blob) % 4]))
    try:
        if not data:
            raise ConnectionResetError(errno.ECONNRESET, "the fork server closed the connection")
        if flags & socket.MSG_CTRUNC and not flags & socket.MSG_TRUNC:
            # Room was made for every descriptor the server attaches: the kernel could
            # not install them here, because this process has no descriptor left.
            raise OSError(errno.EMFILE, "no descriptor left to receive the terminal's")
        if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
            raise ConnectionResetError("truncated answer from the fork server")
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise ConnectionResetError("malformed answer from the fork server") from None
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for fd in fds:
        os.set_blocking(fd, False)
    return message, fds


async def _readable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    waiter: asyncio.Future[None] = loop.create_future()

    def _ready() -> None:
        if not waiter.done():
            waiter.set_result(None)

    loop.add_reader(fd, _ready)
    try:
        await waiter
    finally:
        loop.remove_reader(fd)


def _completed(value: str | None) -> concurrent.futures.Future[str | None]:
    future: concurrent.futures.Future[str | None] = concurrent.futures.Future()
    future.set_result(value)
    return future


_SERVER_SINGLETON = ForkServer()


def fork_server() -> ForkServer:
    """The fork server of this process."""
    return _SERVER_SINGLETON
