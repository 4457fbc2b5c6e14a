"""The fork server: starts terminal children so the host process never forks.

Forking a large interpreter copies its page tables while holding the GIL, which stalls
the host's event loop for milliseconds per terminal. This small process does the fork
instead: for each request it allocates a PTY, forks, makes the child lead a new session
with the slave as its controlling terminal, and passes the master back over a unix
socket (``SCM_RIGHTS``).

Run as a standalone script (``python -I -S forkserver.py <host pid> <lifeline fd>``)
with a listening ``SOCK_SEQPACKET`` socket on stdin. Protocol, one connection per
terminal (only the host's pid may connect, checked with ``SO_PEERCRED``):

- host sends ``{"executable", "argv", "cwd", "env", "rows", "cols"}`` and optionally
  ``"nofile"`` (the soft open-file limit the child starts with) and ``"cgroups"`` (the
  ``cgroup.procs`` files the child writes its pid into before anything else, so it and
  everything it starts are in its session's cgroups from its first instruction) as
  JSON; the server answers ``{"pid": n}`` with the master attached, or ``{"error":
  text, "errno": n, "stage": s}`` once the child has reported why it could not exec (no
  child is left behind). ``stage`` says where it failed — ``pty``, ``prepare``,
  ``fork``, ``cgroup``, ``exec`` or ``accept`` (the server itself had no descriptor left for the connection) — so the host
  can tell a host limit (no pseudo-terminal, no process, no descriptor) from a bad
  request;
- host sends ``{"op": "reap"}`` after it saw the child exit (through the pidfd); the
  server reaps it and answers ``{"status": raw wait status}``. Until then the child stays
  a zombie, so its pid cannot be reused while the host still inspects it. A pidfd can
  turn readable a moment before its zombie is reapable; such a request is answered at
  the next ``SIGCHLD``, which the kernel sends exactly when it is;
- a connection that closes before its child was reaped means the host gave the child up:
  the server SIGKILLs and reaps it.

The server is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process a terminal's
tree orphans — a ``setsid`` daemon whose parent exited, a double fork — is reparented
to the server, not to the host's init (in a container: the world daemon, its PID 1).
It stays findable below the server (the host's teardown ends those that carry a closed
terminal's tag where no cgroup holds them, :mod:`.strays`), and the server reaps each at
its exit, so none lingers as a zombie.

The server dies with the host: ``PR_SET_PDEATHSIG`` (the host starts it from a thread
that lives as long as the host), and end of file on the lifeline socket, whose other end
only the host holds. On either, its remaining children are SIGKILLed.

Standard library only, no site packages: it starts in milliseconds, forks cheaply, and
cannot be broken by the host's environment.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import resource
import selectors
import signal
import socket
import struct
import sys
import termios
from typing import Any

_MAX_MESSAGE = 1 << 20
_JOIN = "join the cgroup"
_UCRED = struct.Struct("3i")
_WINSIZE = struct.Struct("4H")
# Dispositions the server changes or inherits from the host interpreter; a child gets
# the defaults back before exec, so its programs see an ordinary terminal process.
_RESET_SIGNALS = (
    signal.SIGINT,
    signal.SIGPIPE,
    signal.SIGXFSZ,
    signal.SIGQUIT,
    signal.SIGHUP,
    signal.SIGTERM,
    signal.SIGTSTP,
    signal.SIGCHLD,
)


class _Child:
    """One terminal child and the connection that owns it."""

    def __init__(self, pid: int, pidfd: int | None) -> None:
        self.pid = pid
        self.pidfd = pidfd
        self.reaped = False
        self.reap_requested = False


class Server:
    def __init__(self, host_pid: int, listener: socket.socket, lifeline: socket.socket) -> None:
        self._host_pid = host_pid
        self._listener = listener
        self._lifeline = lifeline
        self._selector = selectors.DefaultSelector()
        self._children: dict[socket.socket, _Child] = {}
        self._orphans: dict[int, _Child] = {}  # pid -> killed child awaiting its reap
        self._running = True
        self._wakeup_r, self._wakeup_w = os.pipe()  # close-on-exec
        os.set_blocking(self._wakeup_w, False)
        os.set_blocking(self._wakeup_r, False)
        # Held for the moment the table is full: freed to accept a connection only to
        # answer it with the reason, since a connection left unaccepted is never told.
        self._reserve: int | None = _open_reserve()

    def run(self) -> None:
        signal.set_wakeup_fd(self._wakeup_w)
        signal.signal(signal.SIGCHLD, lambda _signum, _frame: None)
        self._selector.register(self._listener, selectors.EVENT_READ, self._accept)
        self._selector.register(self._lifeline, selectors.EVENT_READ, self._lifeline_event)
        self._selector.register(self._wakeup_r, selectors.EVENT_READ, self._child_event)
        while self._running:
            for key, _ in self._selector.select():
                key.data(key.fileobj)
        self._kill_all()

    # -- events ----------------------------------------------------------------------

    def _accept(self, _listener: object) -> None:
        try:
            conn, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            self._refuse(exc)
            return
        if not self._from_host(conn):
            return
        conn.setblocking(True)
        self._selector.register(conn, selectors.EVENT_READ, self._message)

    def _from_host(self, conn: socket.socket) -> bool:
        raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        if _UCRED.unpack(raw)[0] != self._host_pid:
            conn.close()  # only the host may ask for terminals
            return False
        return True

    def _refuse(self, exc: OSError) -> None:
        """No descriptor for a waiting connection: take it with the reserve's, answer it
        with the reason, and keep the reserve's place until the host hangs up."""
        if self._reserve is None:
            return  # already answering one: the next is accepted once that one is gone
        os.close(self._reserve)
        self._reserve = None
        try:
            conn, _ = self._listener.accept()
        except OSError:
            self._reserve = _open_reserve()
            return
        if not self._from_host(conn):
            self._reserve = _open_reserve()
            return
        conn.setblocking(True)
        reply = {"error": f"cannot accept the request: {exc.strerror}", "errno": exc.errno}
        with contextlib.suppress(OSError):
            conn.send(json.dumps({**reply, "stage": "accept"}).encode())
        self._selector.register(conn, selectors.EVENT_READ, self._refused)

    def _refused(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(_MAX_MESSAGE)
        except InterruptedError:
            return
        except OSError:
            data = b""
        if not data:  # the host hung up: the reserve takes the place back
            self._selector.unregister(conn)
            conn.close()
            self._reserve = _open_reserve()

    def _lifeline_event(self, _sock: object) -> None:
        try:
            data = self._lifeline.recv(64)
        except InterruptedError:
            return
        except OSError:
            data = b""
        if not data:
            self._running = False

    def _message(self, conn: socket.socket) -> None:
        try:
            data = conn.recv(_MAX_MESSAGE)
        except InterruptedError:
            return
        except OSError:
            data = b""
        if not data:
            self._disconnect(conn)
            return
        try:
            request = json.loads(data)
            if not isinstance(request, dict):
                raise ValueError("request is not an object")
        except ValueError as exc:
            self._reply(conn, {"error": f"malformed request: {exc}", "errno": 0})
            return
        if request.get("op") == "reap":
            self._reap_request(conn)
        elif conn in self._children:
            self._reply(conn, {"error": "this connection already has a child", "errno": 0})
        else:
            self._spawn_request(conn, request)

    def _child_event(self, _fd: object) -> None:
        """A child changed state (SIGCHLD): answer waiting reaps, reap killed orphans."""
        with contextlib.suppress(OSError):
            while os.read(self._wakeup_r, 512):
                pass
        for conn, child in list(self._children.items()):
            if child.reap_requested and not child.reaped:
                self._try_reap(conn, child)
        for pid, child in list(self._orphans.items()):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                del self._orphans[pid]
                _close_pidfd(child)
        self._reap_adopted()

    def _reap_adopted(self) -> None:
        """Reap the exited processes the server adopted as subreaper. Its own terminal
        children are never reaped here: each stays a zombie until the host asks."""
        own = {child.pid for child in self._children.values()} | set(self._orphans)
        for pid in _children_of_self():
            if pid in own:
                continue
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)

    # -- requests --------------------------------------------------------------------

    def _spawn_request(self, conn: socket.socket, request: dict[str, Any]) -> None:
        try:
            pid, master = _spawn(request)
        except _SpawnError as exc:
            self._reply(conn, {"error": str(exc), "errno": exc.errno, "stage": exc.stage})
            return
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None
        self._children[conn] = _Child(pid, pidfd)
        try:
            conn.sendmsg(
                [json.dumps({"pid": pid}).encode()],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", master))],
            )
        except OSError:
            self._disconnect(conn)  # the host went away meanwhile: the child goes too
        finally:
            os.close(master)

    def _reap_request(self, conn: socket.socket) -> None:
        child = self._children.get(conn)
        if child is None or child.reaped:
            self._reply(conn, {"error": "no child to reap on this connection", "errno": 0})
            return
        child.reap_requested = True
        self._try_reap(conn, child)

    def _try_reap(self, conn: socket.socket, child: _Child) -> None:
        try:
            pid, status = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            child.reaped = True
            self._reply(conn, {"error": "the child was already reaped", "errno": errno.ECHILD})
            return
        if pid == 0:
            return  # not reapable yet: answered at the next SIGCHLD
        child.reaped = True
        _close_pidfd(child)
        self._reply(conn, {"status": status})

    def _disconnect(self, conn: socket.socket) -> None:
        self._selector.unregister(conn)
        conn.close()
        child = self._children.pop(conn, None)
        if child is None or child.reaped:
            return
        _kill(child)
        # Reaped at its SIGCHLD, without blocking other requests meanwhile.
        self._orphans[child.pid] = child
        self._child_event(None)

    def _reply(self, conn: socket.socket, message: dict[str, Any]) -> None:
        try:
            conn.send(json.dumps(message).encode())
        except OSError:
            self._disconnect(conn)

    def _kill_all(self) -> None:
        children = [c for c in self._children.values() if not c.reaped]
        children += self._orphans.values()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for child in children:
            _kill(child)
        for child in children:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(child.pid, 0)


class _SpawnError(Exception):
    def __init__(self, message: str, code: int, stage: str) -> None:
        super().__init__(message)
        self.errno = code
        self.stage = stage


def _open_reserve() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _spawn(request: dict[str, Any]) -> tuple[int, int]:
    """Fork and exec the requested child on a new PTY; return (pid, master fd)."""
    try:
        executable = str(request["executable"])
        argv = [str(arg) for arg in request["argv"]]
        cwd = request.get("cwd")
        env = {str(k): str(v) for k, v in dict(request["env"]).items()}
        rows, cols = int(request["rows"]), int(request["cols"])
        nofile = request.get("nofile")
        nofile = None if nofile is None else int(nofile)
        cgroups = [str(path) for path in request.get("cgroups") or ()]
    except (KeyError, TypeError, ValueError) as exc:
        raise _SpawnError(f"malformed spawn request: {exc!r}", 0, "request") from exc
    try:
        master, slave = os.openpty()  # both close-on-exec
    except OSError as exc:
        raise _SpawnError(f"cannot allocate a PTY: {exc}", exc.errno or 0, "pty") from exc
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, _WINSIZE.pack(rows, cols, 0, 0))
        report_r, report_w = os.pipe()  # close-on-exec: EOF on it means exec succeeded
    except OSError as exc:
        os.close(master)
        os.close(slave)
        raise _SpawnError(f"cannot prepare the PTY: {exc}", exc.errno or 0, "prepare") from exc
    try:
        pid = os.fork()
    except OSError as exc:
        for fd in (master, slave, report_r, report_w):
            os.close(fd)
        raise _SpawnError(f"cannot fork: {exc}", exc.errno or 0, "fork") from exc
    if pid == 0:
        _child(slave, report_w, executable, argv, cwd, env, nofile, cgroups)  # never returns
    os.close(slave)
    os.close(report_w)
    report = b""
    while True:
        try:
            chunk = os.read(report_r, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        report += chunk
    os.close(report_r)
    if not report:
        return pid, master
    os.close(master)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
    code_text, _, message = report.decode("utf-8", "replace").partition("\0")
    try:
        code = int(code_text)
    except ValueError:
        code = 0
    stage = "cgroup" if message.startswith(f"cannot {_JOIN}") else "exec"
    raise _SpawnError(message, code, stage)


def _child(
    slave: int,
    report: int,
    executable: str,
    argv: list[str],
    cwd: str | None,
    env: dict[str, str],
    nofile: int | None,
    cgroups: list[str],
) -> None:
    """In the forked child: join its cgroups, become a session leader on the PTY, then
    exec. Never returns."""
    step = "setsid"
    try:
        for procs in cgroups:
            step = f"{_JOIN} {os.path.dirname(procs)}"
            fd = os.open(procs, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, str(os.getpid()).encode())
            finally:
                os.close(fd)
        step = "setsid"
        os.setsid()
        step = "set the controlling terminal"
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        step = "attach the terminal"
        for target in (0, 1, 2):
            os.dup2(slave, target)  # inheritable; the original slave closes at exec
        if cwd is not None:
            step = f"change directory to {cwd!r}"
            os.chdir(cwd)
        if nofile is not None:
            step = "restore the open-file limit"
            _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if hard != resource.RLIM_INFINITY:
                nofile = min(nofile, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, hard))
        step = "reset signals"
        for sig in _RESET_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        step = f"exec {executable!r}"
        os.execve(executable, argv, env)
    except OSError as exc:
        message = f"cannot {step}: {exc.strerror or exc}"
        with contextlib.suppress(OSError):
            os.write(report, f"{exc.errno or 0}\0{message}".encode())
    except BaseException as exc:  # anything at all: report it, never return to the server
        with contextlib.suppress(BaseException):
            os.write(report, f"0\0cannot {step}: {exc!r}".encode())
    finally:
        os._exit(127)


def _kill(child: _Child) -> None:
    """SIGKILL an unreaped child and its process group.

    The group goes too: a child given up while it starts may have started helpers of its
    own (bubblewrap's pid 1), and one that had not yet asked to die with its parent would
    outlive it. The child leads that group and is not reaped, so no other group can
    carry its number.
    """
    with contextlib.suppress(OSError):
        os.killpg(child.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        if child.pidfd is not None:
            signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
        else:
            os.kill(child.pid, signal.SIGKILL)  # unreaped, so the pid is still ours


def _close_pidfd(child: _Child) -> None:
    if child.pidfd is not None:
        os.close(child.pidfd)
        child.pidfd = None


def _children_of_self() -> list[int]:
    """The server's children, its adopted ones included (``/proc/self/task/*/children``)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(
                f"/proc/self/task/{task}/children", "rb"
            ) as file:
                found += [int(word) for word in file.read().split()]
    return found


def _die_with(host_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when the thread that started it ends, and
    to reparent the orphans of its terminals' trees to it (child subreaper)."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig, pr_set_child_subreaper = 1, 36
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        libc.prctl(pr_set_child_subreaper, 1, 0, 0, 0)
    if os.getppid() != host_pid:  # the host died before the request took effect
        os._exit(0)


def main() -> None:
    host_pid, lifeline_fd = int(sys.argv[1]), int(sys.argv[2])
    # Terminal signals for the host's foreground group are not ours; the host decides.
    for name in ("SIGINT", "SIGQUIT", "SIGTSTP", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    # It holds two descriptors per terminal: as many as the host may, not fewer.
    with contextlib.suppress(OSError, ValueError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    listener = socket.socket(fileno=0)
    listener.set_inheritable(False)
    listener.setblocking(False)
    lifeline = socket.socket(fileno=lifeline_fd)
    lifeline.set_inheritable(False)
    lifeline.sendall(b"ready\n")
    # After "ready", so the host's first open does not wait for ctypes to load; a host
    # that died meanwhile is noticed by the parent check in here, or by end of file.
    _die_with(host_pid)
    Server(host_pid, listener, lifeline).run()


if __name__ == "__main__":
    main()
