"""The transports a world connection runs on, fed straight into its frame decoder.

A connection over asyncio streams pays a task wake-up for every read: the transport's
callback puts the bytes in a ``StreamReader`` and wakes the task waiting in ``read``,
which runs one loop turn later and only then decodes. On a world send that is one turn on
each side of each hop, on the critical path of every call. Here the transport's protocol
hands what it read to :meth:`Connection.feed <.connection.Connection.feed>` in its own
callback, so a frame is decoded and dispatched in the turn its bytes arrived.

Three ways in, the same connection after: :func:`connect_unix` (a daemon's socket),
:func:`over_pipes` (a command's stdio, or a relay's handed-over pipes) and
:func:`serve_unix` (the daemon's listener).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from typing import cast

from .connection import Connection

__all__ = ["TransportWriter", "connect_unix", "over_pipes", "serve_unix"]

log = logging.getLogger("dsh_terminal_core.worlds")


class TransportWriter:
    """What a connection writes through: a transport, with flow control and closing.

    ``drain`` waits while the transport's buffer is over its high-water mark (the peer
    reads slowly); ``close`` closes the read side as well when it is a separate pipe.
    """

    def __init__(
        self, transport: asyncio.WriteTransport, read_transport: asyncio.BaseTransport | None = None
    ) -> None:
        self._transport = transport
        self._read_transport = read_transport
        self._resumed: asyncio.Future[None] | None = None
        self._closed = asyncio.get_running_loop().create_future()

    def write(self, data: bytes) -> None:
        if self._closed.done() or self._transport.is_closing():
            raise ConnectionResetError("the world connection is closed")
        self._transport.write(data)

    async def drain(self) -> None:
        if self._closed.done():
            raise ConnectionResetError("the world connection is closed")
        if self._resumed is not None:
            await asyncio.shield(self._resumed)

    def close(self) -> None:
        self._transport.close()
        if self._read_transport is not None:
            self._read_transport.close()

    async def wait_closed(self) -> None:
        """Until the transport is gone (what was buffered was written, or could not be)."""
        await asyncio.shield(self._closed)

    # What the transport's protocol reports.
    def paused(self) -> None:
        if self._resumed is None:
            self._resumed = asyncio.get_running_loop().create_future()

    def resumed(self) -> None:
        if self._resumed is not None:
            if not self._resumed.done():
                self._resumed.set_result(None)
            self._resumed = None

    def lost(self) -> None:
        self.resumed()
        if not self._closed.done():
            self._closed.set_result(None)


class _Wire(asyncio.Protocol):
    """One transport's callbacks: what it reads goes to the connection (``reads``), and
    what it says of writing goes to the connection's writer."""

    def __init__(self, connection: Connection, *, reads: bool, writes: bool) -> None:
        self._connection = connection
        self._reads = reads
        self._writes = writes
        self.writer: TransportWriter | None = None

    def data_received(self, data: bytes) -> None:
        self._connection.feed(data)

    def eof_received(self) -> bool:
        self._connection.feed_eof()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self._reads:
            self._connection.feed_eof()
        if self._writes and self.writer is not None:
            self.writer.lost()

    def pause_writing(self) -> None:
        if self.writer is not None:
            self.writer.paused()

    def resume_writing(self) -> None:
        if self.writer is not None:
            self.writer.resumed()


async def connect_unix(path: str, *, max_frame: int) -> Connection:
    """A connection to the unix socket at ``path``; ``OSError`` when nobody listens."""
    loop = asyncio.get_running_loop()
    connection = Connection(None, None, max_frame=max_frame)
    wire = _Wire(connection, reads=True, writes=True)
    transport, _ = await loop.create_unix_connection(lambda: wire, path)
    wire.writer = TransportWriter(transport)
    connection.attach(wire.writer)
    return connection


async def over_pipes(read_fd: int, write_fd: int, *, max_frame: int) -> Connection:
    """A connection reading ``read_fd`` and writing ``write_fd``; it owns both from now on
    (they are closed when it closes, or here if it cannot start)."""
    loop = asyncio.get_running_loop()
    connection = Connection(None, None, max_frame=max_frame)
    reading = _Wire(connection, reads=True, writes=False)
    writing = _Wire(connection, reads=False, writes=True)
    try:
        read_transport, _ = await loop.connect_read_pipe(
            lambda: reading, os.fdopen(read_fd, "rb", 0)
        )
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(write_fd)
        raise
    try:
        transport, _ = await loop.connect_write_pipe(lambda: writing, os.fdopen(write_fd, "wb", 0))
    except BaseException:
        read_transport.close()
        raise
    writing.writer = TransportWriter(transport, read_transport)
    connection.attach(writing.writer)
    return connection


async def serve_unix(
    listener: socket.socket,
    on_connection: Callable[[Connection], Awaitable[None]],
    *,
    max_frame: int,
    allowed: Callable[[socket.socket], bool],
) -> asyncio.Server:
    """Serve each connection ``listener`` accepts with ``on_connection`` (in a task of its
    own); a peer ``allowed`` refuses is closed unread."""
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    class _Accepted(_Wire):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            # A socket transport (uvloop's too, which subclasses none of asyncio's).
            writable = cast(asyncio.WriteTransport, transport)
            sock = transport.get_extra_info("socket")
            if sock is None or not allowed(sock):
                log.warning("refused a world connection from another user")
                self._reads = False
                transport.close()
                return
            self.writer = TransportWriter(writable)
            self._connection.attach(self.writer)
            task = loop.create_task(on_connection(self._connection))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def accepted() -> _Accepted:
        return _Accepted(Connection(None, None, max_frame=max_frame), reads=True, writes=True)

    return await loop.create_unix_server(accepted, sock=listener)
