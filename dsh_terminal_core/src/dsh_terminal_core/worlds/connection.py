"""One framed connection over a pair of asyncio streams, the same on both sides.

Both sides write the magic and their ``hello`` first, then read the peer's. After that a
connection is a stream of frames each way: :meth:`Connection.send` writes one (in the
order called, which is what keeps a send's output ahead of its settlement), and
:meth:`Connection.frames` yields the peer's until it ends. A malformed or oversize frame
ends the connection with a ``bye`` naming the wire code; only this connection is
affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from .frames import MAGIC, Frame, FrameError, FrameReader, encode_frame
from .messages import ProtocolError

__all__ = ["Connection", "choose_version"]

log = logging.getLogger("dsh_terminal_core.worlds")

_READ_CHUNK = 256 * 1024
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


class Connection:
    """Frames over ``reader``/``writer``; ``max_frame`` bounds what the peer may send."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, max_frame: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._decoder = FrameReader(max_frame)
        self._pending: list[Frame] = []
        self._closed = False
        self.peer_hello: dict[str, Any] = {}
        # Frames sent in one loop turn leave in one write: a send's output, its collected
        # text and its settlement wake the other side once, not once per frame.
        self._outgoing = bytearray()
        self._flush_scheduled = False
        self._linger: asyncio.TimerHandle | None = None
        #: When the peer last sent anything (loop time): the heartbeat's evidence.
        self.last_heard = asyncio.get_running_loop().time()

    @property
    def preamble(self) -> bytes:
        """What the peer wrote before its magic (a banner), for error messages."""
        return self._decoder.preamble

    @property
    def closed(self) -> bool:
        return self._closed

    def send(
        self, header: dict[str, Any], payload: bytes = b"", *, linger: bool = False, now: bool = False
    ) -> None:
        """Queue one frame; frames go out in the order they were sent, at the end of the
        loop turn with every other frame of that turn, in one write.

        ``linger`` (output) may wait up to :data:`LINGER_S` for more frames to join the
        write, so a command's output, its prompt and the send's settlement wake the
        other side once; any frame sent without it flushes everything queued. ``now``
        (a settlement: the frame the other side waits for) writes everything queued at
        once instead of a loop turn later: nothing else of the send is left to join it.
        """
        if self._closed:
            return
        self._outgoing += encode_frame(header, payload)
        if now:
            self._flush()
            return
        loop = asyncio.get_running_loop()
        if not linger:
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            if not self._flush_scheduled:
                self._flush_scheduled = True
                loop.call_soon(self._flush)
        elif not self._flush_scheduled and self._linger is None:
            self._linger = loop.call_later(LINGER_S, self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._closed or not self._outgoing:
            return
        data, self._outgoing = bytes(self._outgoing), bytearray()
        try:
            self._writer.write(data)
        except (ConnectionError, RuntimeError):
            self._closed = True

    async def drain(self) -> None:
        """Wait while the transport's buffer is full (the peer reads slowly)."""
        self._flush()
        if self._closed:
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
                self.bye(fault.code, fault.message)
                log.warning("world connection closed: %s (%s)", fault.message, fault.code)
                return
            if frame is None:
                return
            if frame.type == "hello":
                self.bye("PROTOCOL_ORDER", "a second hello")
                return
            yield frame

    async def _next(self) -> Frame | None:
        while not self._pending:
            self._decoder.check()
            try:
                data = await self._reader.read(_READ_CHUNK)
            except (ConnectionError, OSError):
                data = b""
            if not data:
                return None
            self.last_heard = asyncio.get_running_loop().time()
            self._pending.extend(self._decoder.feed(data))
        return self._pending.pop(0)

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

    def close(self) -> None:
        if self._closed:
            return
        self._flush()
        self._closed = True
        with contextlib.suppress(Exception):
            self._writer.close()
