"""A relay hands its stdin and stdout to the daemon, which then serves them itself.

A relay (``world --stdio --socket PATH``) copying bytes between its stdio and the daemon's
socket is one more process each way on every frame: a wake-up, a read and a write per
direction, on a send's critical path. A daemon that supports it listens on a second
socket, ``PATH + ".fds"`` (its presence is the negotiation: an older daemon has none, and
the relay copies as before). The relay connects there, sends :data:`MARKER` with its two
descriptors attached (``SCM_RIGHTS``), and once the daemon says :data:`TAKEN` it closes its
own copies and only waits: the daemon reads the harness's frames from the pipe itself and
writes its answers straight into the other one, the same protocol as on a socket.

The relay stays alive because it *is* the exec session (``podman exec``, ``kubectl exec``
end when it exits), and its socket to the daemon is how each side learns the other's end:
the daemon ends the connection when the relay's socket closes (the relay was killed, the
exec session ended), and the relay exits once the daemon closes it (the harness closed
stdin, the daemon ended the connection or died) — saying on stderr, as the copying relay
does, when no daemon answers any more.

Only pipes are handed over: a socket on stdio shares its one description for both
directions, which the pipe transports cannot split. ``O_NONBLOCK`` lives on the open file
description, which the daemon then shares with the relay; the relay never touches its
copies again and closes them, so nothing in it depends on that flag. The descriptors are
only taken from a peer that passes the same ``SO_PEERCRED`` check as the main socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import struct
from collections.abc import Awaitable, Callable

from .connection import Connection
from .frames import DEFAULT_MAX_FRAME
from .wire import over_pipes

__all__ = ["MARKER", "TAKEN", "handoff_path", "offer", "peer_allowed", "serve_handoffs", "wait_out"]

log = logging.getLogger("dsh_terminal_core.worlds")

#: What the relay sends with its two descriptors: a version of this little exchange.
MARKER = b"DSHFD1\n"
#: The daemon's answer once it serves the descriptors; anything else is a refusal.
TAKEN = b"k"
#: How long either side waits for the other's part of the exchange.
EXCHANGE_S = 5.0


def handoff_path(path: str) -> str:
    """Where a daemon serving ``path`` takes descriptors."""
    return f"{path}.fds"


def peer_allowed(sock: socket.socket) -> bool:
    """Only this user (or root) may talk to the daemon: the socket is the boundary."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid in (os.getuid(), 0)


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


# -- the relay's side ---------------------------------------------------------------


def offer(path: str, wire_in: int, wire_out: int) -> socket.socket | None:
    """Hand ``wire_in``/``wire_out`` to the daemon at ``path``; its socket, or None when
    it does not take them (an older daemon, stdio that is not pipes): then copy."""
    if not (_is_pipe(wire_in) and _is_pipe(wire_out)):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(EXCHANGE_S)
        sock.connect(handoff_path(path))
        socket.send_fds(sock, [MARKER], [wire_in, wire_out])
        answer = sock.recv(len(TAKEN))
    except OSError:
        sock.close()
        return None
    if answer != TAKEN:
        sock.close()
        return None
    sock.settimeout(None)
    return sock


def wait_out(sock: socket.socket) -> None:
    """Block until the daemon closes its side (it never writes after :data:`TAKEN`)."""
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass
    sock.close()


# -- the daemon's side --------------------------------------------------------------


async def serve_handoffs(
    listener: socket.socket, serve: Callable[[Connection], Awaitable[None]]
) -> None:
    """Accept relays on ``listener`` until cancelled; each one's descriptors are served
    by ``serve`` (the same call a socket connection gets, which tracks the connection:
    cancelling this stops accepting and leaves the connections to the daemon's stop)."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()
    while True:
        sock, _ = await loop.sock_accept(listener)
        task = loop.create_task(_take(sock, serve))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def _readable(sock: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    loop.add_reader(sock.fileno(), lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


async def _take(sock: socket.socket, serve: Callable[[Connection], Awaitable[None]]) -> None:
    sock.setblocking(False)
    fds: list[int] = []
    try:
        if not peer_allowed(sock):
            log.warning("refused a world relay's descriptors from another user")
            return  # closed unread: the kernel closes whatever descriptors it carried
        try:
            async with asyncio.timeout(EXCHANGE_S):
                await _readable(sock)
            message, fds, flags, _ = socket.recv_fds(sock, len(MARKER), 2)
        except (TimeoutError, OSError):
            return
        if message != MARKER or len(fds) != 2 or flags & socket.MSG_CTRUNC:
            return
        if not all(_is_pipe(fd) for fd in fds):
            return
        wire_in, wire_out = fds
        fds = []
        try:
            await _serve_pipes(sock, wire_in, wire_out, serve)
        except (OSError, ValueError) as exc:
            log.warning("could not serve a world relay's descriptors: %s", exc)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        sock.close()


async def _serve_pipes(
    sock: socket.socket,
    wire_in: int,
    wire_out: int,
    serve: Callable[[Connection], Awaitable[None]],
) -> None:
    """Serve one connection on the relay's pipes until it ends or the relay goes."""
    loop = asyncio.get_running_loop()
    connection = await over_pipes(wire_in, wire_out, max_frame=DEFAULT_MAX_FRAME)

    def relay_gone() -> None:
        # Readable: the relay ended (it never writes after its marker). Ending the read
        # side ends the connection as an EOF on stdin does.
        try:
            if sock.recv(64):
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        loop.remove_reader(sock.fileno())
        connection.feed_eof()

    try:
        sock.send(TAKEN)
    except OSError:
        connection.close()
        return
    loop.add_reader(sock.fileno(), relay_gone)
    try:
        await serve(connection)
    finally:
        loop.remove_reader(sock.fileno())
        connection.close()
        # What is still buffered reaches the pipe before the relay (the exec session)
        # is told to end.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                await connection.wait_closed()
