"""One framed connection over a pair of asyncio streams, the same on both sides.

Both sides write the magic and their ``hello`` first, then read the peer's. After that a
connection is a stream of frames each way: :meth:`Connection.send` writes one (in the
order called, which is what keeps a send's output ahead of its settlement), and
:meth:`Connection.dispatch` hands each of the peer's to a handler as it arrives
(:meth:`Connection.frames` yields them instead, a task wake-up per read later). A
malformed or oversize frame ends the connection with a ``bye`` naming the wire code;
only this connection is affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from .frames import MAGIC, Frame, FrameError, FrameReader, encode_frame
from .messages import ProtocolError

__all__ = ["Connection", "choose_version"]

log = logging.getLogger("dsh_terminal_core.worlds")

_READ_CHUNK = 256 * 1024
#: The most payload merged frames carry (see ``Connection.send``).
_MERGE_MAX = 64 * 1024
#: The longest output may wait to leave with what follows it (a prompt, a settlement).
LINGER_S = 0.002
#: Each side pings after this long; a peer silent for HEARTBEAT_MISSES of them is gone.
HEARTBEAT_S = 10.0
HEARTBEAT_MISSES = 3


def choose_version(ours: tuple[int, ...], theirs: object) -> int:
    """The highest version both sides speak, or ``VERSION_UNSUPPORTED``."""
    if not isinstance(theirs, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in theirs
    ):
        raise ProtocolError("MALFORMED_FRAME", "hello without a list of versions")
    common = set(ours) & set(theirs)
    if not common:
        raise ProtocolError(
            "VERSION_UNSUPPORTED",
            f"no protocol version in common (we speak {list(ours)}, the peer {theirs})",
        )
    return max(common)


class _Writer(Protocol):
    """What a connection writes through: a ``StreamWriter`` or a :mod:`.wire` writer."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...

    async def wait_closed(self) -> None: ...


class Connection:
    """Frames over a transport; ``max_frame`` bounds what the peer may send.

    What the transport reads arrives through :meth:`feed` (from a :mod:`.wire` protocol,
    in the read callback itself) and is decoded at once. Until :meth:`dispatch` is
    called, frames queue for :meth:`handshake` and :meth:`frames`; after it, each goes to
    the handler as it is decoded. Built over a ``reader`` (streams: tests, tools), it
    reads only while something waits for a frame, as a stream's user expects.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader | None,
        writer: _Writer | None,
        *,
        max_frame: int,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._writer = writer
        self._decoder = FrameReader(max_frame)
        self._queue: deque[Frame] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._fault: FrameError | ProtocolError | None = None
        self._input_ended = False
        self._handler: Callable[[Frame], None] | None = None
        self._dispatching: asyncio.Future[None] | None = None
        self._closed = False
        self.peer_hello: dict[str, Any] = {}
        # Frames sent in one loop turn leave in one write: a send's output, its collected
        # text and its settlement wake the other side once, not once per frame.
        self._outgoing = bytearray()
        #: The last frame queued with a merge key: (key, where it starts, its payload).
        self._tail: tuple[object, int, bytes] | None = None
        self._flush_scheduled = False
        self._linger: asyncio.TimerHandle | None = None
        #: When the peer last sent anything (loop time): the heartbeat's evidence.
        self.last_heard = self._loop.time()
        self._reader = reader

    def attach(self, writer: _Writer) -> None:
        """The writer, for a connection made before its transport was (:mod:`.wire`)."""
        self._writer = writer

    @property
    def preamble(self) -> bytes:
        """What the peer wrote before its magic (a banner), for error messages."""
        return self._decoder.preamble

    @property
    def closed(self) -> bool:
        return self._closed

    def send(
        self,
        header: dict[str, Any],
        payload: bytes = b"",
        *,
        linger: bool = False,
        now: bool = False,
        merge: object = None,
    ) -> None:
        """Queue one frame; frames go out in the order they were sent, at the end of the
        loop turn with every other frame of that turn, in one write.

        ``linger`` (output) may wait up to :data:`LINGER_S` for more frames to join the
        write, so a command's output, its prompt and the send's settlement wake the
        other side once; any frame sent without it flushes everything queued. ``now``
        (a settlement: the frame the other side waits for) writes everything queued at
        once instead of a loop turn later: nothing else of the send is left to join it.

        ``merge``: a frame sent with the same key as the last one queued (and not written
        yet) replaces it, carrying both payloads: a session's output read in two pieces
        (its echo, then the command's output) reaches the other side as one frame.
        """
        if self._closed:
            return
        tail = self._tail
        if (
            merge is not None
            and tail is not None
            and tail[0] is merge
            and len(tail[2]) + len(payload) <= _MERGE_MAX
        ):
            del self._outgoing[tail[1] :]
            payload = tail[2] + payload
        self._tail = None if merge is None else (merge, len(self._outgoing), payload)
        self._outgoing += encode_frame(header, payload)
        if now:
            self._flush()
            return
        if not linger:
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
        elif not self._flush_scheduled and self._linger is None:
            self._linger = self._loop.call_later(LINGER_S, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        self._tail = None
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._closed or not self._outgoing or self._writer is None:
            return
        data, self._outgoing = bytes(self._outgoing), bytearray()
        try:
            self._writer.write(data)
        except (ConnectionError, RuntimeError):
            self._closed = True

    async def drain(self) -> None:
        """Wait while the transport's buffer is full (the peer reads slowly)."""
        self._flush()
        if self._closed or self._writer is None:
            return
        try:
            await self._writer.drain()
        except (ConnectionError, RuntimeError):
            self._closed = True

    async def handshake(self, hello: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        """Write the magic and ``hello``; return the peer's ``hello`` header.

        Raises :class:`ProtocolError` (``PROTOCOL_ORDER`` when the first frame is not a
        hello), :class:`FrameError`, ``TimeoutError``, or ``EOFError`` when the peer
        ended first.
        """
        assert self._writer is not None, "a connection shakes hands once it can write"
        self._writer.write(MAGIC + encode_frame({"t": "hello", **hello}))
        with contextlib.suppress(ConnectionError):
            await self._writer.drain()
        async with asyncio.timeout(timeout_s):
            frame = await self._next()
        if frame is None:
            raise EOFError("the peer closed the connection before its hello")
        if frame.type != "hello":
            raise ProtocolError("PROTOCOL_ORDER", f"the first frame was {frame.type!r}, not hello")
        self.peer_hello = frame.header
        return frame.header

    async def frames(self) -> AsyncIterator[Frame]:
        """The peer's frames until it ends; a protocol fault says ``bye`` and stops."""
        while True:
            try:
                frame = await self._next()
            except (FrameError, ProtocolError) as fault:
                self._refuse(fault)
                return
            if frame is None:
                return
            if frame.type == "hello":
                self.bye("PROTOCOL_ORDER", "a second hello")
                return
            yield frame

    async def dispatch(self, handler: Callable[[Frame], None]) -> None:
        """Give each of the peer's frames to ``handler`` in the turn it arrives, until the
        connection ends; a protocol fault says ``bye`` and ends it.

        Frames already read (with the hello) go first. ``handler`` runs inside the
        transport's callback, so it must not block; an exception from it stops the
        dispatch and is raised here (the connection is left to the caller to close).
        """
        self._handler = handler
        self._dispatching = self._loop.create_future()
        try:
            while self._queue and not self._dispatching.done():
                self._give(self._queue.popleft())
            if not self._dispatching.done():
                if self._fault is not None:
                    self._refuse(self._fault)
                elif self._input_ended:
                    self._dispatching.set_result(None)
            while self._reader is not None and not self._dispatching.done():
                await self._read_stream(self._reader)
            await self._dispatching
        finally:
            self._handler = None
            self._dispatching = None

    def feed(self, data: bytes) -> None:
        """Bytes the transport read: decoded now, then dispatched or queued."""
        if self._input_ended:
            return
        self.last_heard = self._loop.time()
        try:
            frames = self._decoder.feed(data)
        except FrameError as fault:
            self._faulted(fault)
            return
        for frame in frames:
            if self._input_ended:
                return
            if self._handler is not None:
                self._give(frame)
            else:
                self._queue.append(frame)
                self._wake()
        try:
            self._decoder.check()
        except FrameError as fault:
            self._faulted(fault)

    def feed_eof(self) -> None:
        """The peer's side ended (or the transport was lost)."""
        if self._input_ended:
            return
        self._input_ended = True
        self._wake()
        if self._dispatching is not None and not self._dispatching.done():
            self._dispatching.set_result(None)

    def _give(self, frame: Frame) -> None:
        assert self._handler is not None and self._dispatching is not None
        if frame.type == "hello":
            self._faulted(ProtocolError("PROTOCOL_ORDER", "a second hello"))
            return
        try:
            self._handler(frame)
        except Exception as exc:
            self._input_ended = True
            if not self._dispatching.done():
                self._dispatching.set_exception(exc)

    def _faulted(self, fault: FrameError | ProtocolError) -> None:
        """The peer sent something unreadable: nothing after it is read."""
        self._input_ended = True
        if self._dispatching is not None and not self._dispatching.done():
            self._refuse(fault)
            return
        self._fault = fault
        self._wake()

    def _refuse(self, fault: FrameError | ProtocolError) -> None:
        self.bye(fault.code, fault.message)
        log.warning("world connection closed: %s (%s)", fault.message, fault.code)
        if self._dispatching is not None and not self._dispatching.done():
            self._dispatching.set_result(None)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _next(self) -> Frame | None:
        while not self._queue:
            if self._fault is not None:
                raise self._fault
            if self._input_ended:
                return None
            if self._reader is not None:
                await self._read_stream(self._reader)
                continue
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._queue.popleft()

    async def _read_stream(self, reader: asyncio.StreamReader) -> None:
        """Feed one read of ``reader`` (a connection built over streams)."""
        try:
            data = await reader.read(_READ_CHUNK)
        except (ConnectionError, OSError):
            data = b""
        if data:
            self.feed(data)
        else:
            self.feed_eof()

    async def keep_alive(
        self, on_dead: Callable[[str], None], interval_s: float | None = None
    ) -> None:
        """Ping the peer every ``interval_s``; when it was silent 3 intervals, close and
        call ``on_dead`` (whose job is to stop whatever still reads this connection).

        A half-open channel (an ssh connection whose far end vanished, a ``kubectl exec``
        stream an idle timeout cut without a FIN, a relay that stopped) then ends within
        3 intervals, and its sessions are resumed or their leases start, instead of
        waiting forever on a read that never returns.
        """
        loop = asyncio.get_running_loop()
        interval_s = HEARTBEAT_S if interval_s is None else interval_s
        n = 0
        while not self._closed:
            await asyncio.sleep(interval_s)
            if loop.time() - self.last_heard > HEARTBEAT_MISSES * interval_s:
                why = f"the peer was silent for {HEARTBEAT_MISSES * interval_s:g} s"
                self.bye("HEARTBEAT_LOST", why)
                on_dead(why)
                return
            n += 1
            self.send({"t": "ping", "n": n})

    def bye(self, code: str, message: str) -> None:
        """Say why this side closes, then close."""
        self.send({"t": "bye", "code": code, "message": message})
        self.close()

    async def wait_closed(self) -> None:
        """Until the transport is gone (what was queued was written, or could not be)."""
        if self._writer is not None:
            await self._writer.wait_closed()

    def close(self) -> None:
        if self._closed:
            return
        self._flush()
        self._closed = True
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self.feed_eof()
