"""The harness's end of one world: the transport, the handshake, requests and events.

A world is reached by a command whose stdin and stdout carry the protocol (``kubectl
exec -i POD -- dsh-terminal world --stdio``, ``docker exec -i``, ``ssh -T``, or
``bwrap ... dsh-terminal world --stdio`` in the tests). :func:`connect` starts it off
the event loop, keeps the last 4 KiB of its stderr, and raises ``WORLD_UNAVAILABLE``
with those lines when it fails to start, exits, or never says hello. The fork of the
command is the harness's own, paid once per world, never per terminal.

A :class:`WorldLink` numbers requests, routes each answer to its caller and each event
to the session it names. When the connection ends — the agent died, the command was
killed — every session on it is told at once (:meth:`WorldEvents.link_lost`), so a send
in flight settles ``session_exit`` then and later calls say the world's agent ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..kernel.errors import ErrorCode, TerminalError
from .connection import Connection, choose_version
from .frames import DEFAULT_MAX_FRAME, Frame, FrameError
from .messages import PROTOCOL_VERSIONS, ProtocolError, error_from_wire
from .wire import connect_unix, over_pipes

__all__ = ["WorldEvents", "WorldLink", "connect", "connect_socket", "world_unavailable"]

log = logging.getLogger("dsh_terminal_core.worlds")

HELLO_TIMEOUT_S = 20.0
_STDERR_TAIL = 4096
_EXIT_GRACE_S = 2.0
# Sessions whose events may wait for their answer (opens and adoptions in flight).
_UNCLAIMED_SESSIONS = 256


def world_unavailable(world: str, why: str, stderr: bytes = b"") -> TerminalError:
    tail = stderr.decode("utf-8", "replace").strip()
    said = f"; its stderr ends: {tail[-1500:]}" if tail else ""
    return TerminalError(
        f"world {world!r} is unavailable: {why}{said}", ErrorCode.WORLD_UNAVAILABLE
    )


class WorldEvents(Protocol):
    """What a session on a link is told: its events, and the link's end."""

    def on_event(self, frame: Frame) -> None: ...

    def link_lost(self, why: str) -> None: ...


class _StderrTail:
    """The last bytes a command wrote to stderr, for the message that says why it failed."""

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def add(self, data: bytes) -> None:
        self._chunks.append(data)
        self._size += len(data)
        while self._size - len(self._chunks[0]) >= _STDERR_TAIL:
            self._size -= len(self._chunks.popleft())

    def text(self) -> bytes:
        return b"".join(self._chunks)[-_STDERR_TAIL:]


class WorldLink:
    """One live connection to a world, shared by every session opened in it."""

    def __init__(
        self,
        name: str,
        connection: Connection,
        process: asyncio.subprocess.Process | None,
        stderr: _StderrReader | None,
    ) -> None:
        self.name = name
        self._conn = connection
        self._process = process
        self._stderr = stderr
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Frame]] = {}
        self._sessions: dict[str, WorldEvents] = {}
        # Events for a session not attached yet: the world sends a session's first sync
        # before the answer that names it, so they wait here for attach().
        self._unclaimed: dict[str, list[Frame]] = {}
        self._reader: asyncio.Task[None] | None = None
        #: Why the connection ended, as the frames last told (a ``bye`` names it).
        self._why = "its connection ended"
        self._heartbeat: asyncio.Task[None] | None = None
        self._lost: str | None = None
        self.hello: dict[str, Any] = {}
        self.version = PROTOCOL_VERSIONS[-1]
        #: Told why, once, after every session on the link was (see ``WorldsService``).
        self.on_lost: Callable[[str], None] | None = None

    @property
    def lost(self) -> str | None:
        """Why the link ended, or None while it is up."""
        return self._lost

    @property
    def world_id(self) -> Mapping[str, Any]:
        world_id: Mapping[str, Any] = self.hello.get("worldId") or {}
        return world_id

    def start(self, heartbeat_s: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        self._reader = loop.create_task(self._read())
        self._heartbeat = loop.create_task(self._conn.keep_alive(self._silent, heartbeat_s))

    def _silent(self, why: str) -> None:
        """The heartbeat found the peer gone; the read waiting on it would never return."""
        if self._reader is not None:
            self._reader.cancel()
        self._end(f"heartbeat lost: {why}")

    def attach(self, sid: str, session: WorldEvents) -> None:
        self._sessions[sid] = session
        for frame in self._unclaimed.pop(sid, []):
            session.on_event(frame)

    def detach(self, sid: str) -> None:
        self._sessions.pop(sid, None)
        self._unclaimed.pop(sid, None)

    def send(self, header: dict[str, Any], payload: bytes = b"", *, now: bool = False) -> None:
        """An event or a request whose answer nobody waits for; ``now`` writes it (and
        whatever was queued before it) at once instead of at the end of the loop turn."""
        self._conn.send(header, payload, now=now)

    def request(self, header: dict[str, Any], payload: bytes = b"") -> asyncio.Future[Frame]:
        """Send a request; the future gets its ``ok`` frame or its error as a TerminalError."""
        answer: asyncio.Future[Frame] = asyncio.get_running_loop().create_future()
        if self._lost is not None:
            answer.set_exception(self._gone())
            return answer
        request_id = next(self._ids)
        self._waiting[request_id] = answer
        self._conn.send({**header, "id": request_id}, payload)
        return answer

    async def call(self, header: dict[str, Any], payload: bytes = b"") -> dict[str, Any]:
        """A request and its answer's header."""
        frame = await self.request(header, payload)
        return frame.header

    def _gone(self) -> TerminalError:
        return TerminalError(
            f"world {self.name!r}'s agent ended ({self._lost})", ErrorCode.SESSION_EXITED
        )

    async def _read(self) -> None:
        try:
            await self._conn.dispatch(self._on_frame)
        except Exception:
            log.exception("world %r: reading its connection failed", self.name)
            self._why = "reading its connection failed"
        finally:
            self._end(self._why)

    def _on_frame(self, frame: Frame) -> None:
        """One frame from the world, in the turn it arrived."""
        kind = frame.type
        if kind in ("ok", "error"):
            self._answer(frame)
        elif kind == "bye":
            header = frame.header
            self._why = f"it said {header.get('code')}: {header.get('message')}"
            self._conn.close()
        elif kind == "ping":
            self._conn.send({"t": "pong", "n": frame.header.get("n")})
        elif kind != "pong":
            sid = frame.header.get("sid")
            if not isinstance(sid, str):
                return
            session = self._sessions.get(sid)
            if session is not None:
                session.on_event(frame)
            elif len(self._unclaimed) < _UNCLAIMED_SESSIONS:
                self._unclaimed.setdefault(sid, []).append(frame)

    def _answer(self, frame: Frame) -> None:
        re_id = frame.header.get("re")
        waiter = self._waiting.pop(re_id, None) if isinstance(re_id, int) else None
        if waiter is None or waiter.done():
            return
        if frame.type == "ok":
            waiter.set_result(frame)
        else:
            waiter.set_exception(error_from_wire(frame.header, self.name))

    def _end(self, why: str) -> None:
        if self._lost is not None:
            return
        self._lost = why
        self._conn.close()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        waiting, self._waiting = self._waiting, {}
        for waiter in waiting.values():
            if not waiter.done():
                waiter.set_exception(self._gone())
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            session.link_lost(f"world {self.name!r}'s agent ended ({why})")
        if self.on_lost is not None:
            self.on_lost(why)

    async def last_words(self, timeout_s: float, enough: Callable[[str], bool]) -> str:
        """What the world's command said on stderr as it ended ("" for a socket).

        Returns once what it said is ``enough``, once its stderr ended (nothing more can
        come), or after ``timeout_s``: a relay whose daemon is gone says so before its
        stdout closes, which spares starting it again to hear the same. The command is
        reaped later, by :meth:`aclose`.
        """
        stderr = self._stderr
        if self._process is None or stderr is None:
            return ""

        async def said_it() -> None:
            while not enough(stderr.text().decode("utf-8", "replace")) and stderr.reading:
                await stderr.changed()

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(said_it(), timeout_s)
        return stderr.text().decode("utf-8", "replace")

    async def aclose(self) -> None:
        """End the connection and make sure the command is gone."""
        if self._lost is None:
            self._conn.bye("CLOSING", "the harness is closing")
        self._end("the harness closed it")
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        await _reap(self._process)
        if self._stderr is not None:
            await self._stderr.aclose()


async def _reap(process: asyncio.subprocess.Process | None) -> None:
    """Wait for the world's command to exit after its stdin closed; kill it after a grace."""
    if process is None or process.returncode is not None:
        return
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), _EXIT_GRACE_S)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


class _StderrReader:
    """The command's stderr on a pipe of our own: read into a tail, closed by us.

    Processes the command leaves behind may hold the pipe's other end, so its end of
    file is not waited for; closing our end is what frees it.
    """

    def __init__(self) -> None:
        self.tail = _StderrTail()
        self._read_fd, self.write_fd = os.pipe()
        self._transport: asyncio.ReadTransport | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed: asyncio.Event | None = None
        #: The pipe reached its end (every writer closed it).
        self.ended = False

    async def start(self) -> None:
        os.close(self.write_fd)
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(self._read_fd, "rb", 0)
        )
        self._task = loop.create_task(self._drain(reader))

    async def _drain(self, reader: asyncio.StreamReader) -> None:
        try:
            while data := await reader.read(4096):
                self.tail.add(data)
                self._wake()
            self.ended = True
        finally:
            self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    @property
    def reading(self) -> bool:
        """More may still arrive: the pipe is read and has not ended."""
        return self._task is not None and not self._task.done() and not self.ended

    async def changed(self) -> None:
        """Until more arrives, the pipe ends, or reading it stops."""
        if not self.reading:
            return
        if self._changed is None:
            self._changed = asyncio.Event()
        await self._changed.wait()

    def text(self) -> bytes:
        return self.tail.text()

    async def settle(self, timeout_s: float) -> None:
        """Give what is still in the pipe ``timeout_s`` to arrive."""
        if self._task is not None:
            with contextlib.suppress(TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._transport is not None:
            self._transport.close()


async def connect_socket(
    name: str,
    path: str,
    *,
    client: Mapping[str, Any] | None = None,
    heartbeat_s: float | None = None,
) -> WorldLink:
    """Connect to a world daemon's socket and shake hands; ``WORLD_UNAVAILABLE`` else."""
    try:
        connection = await connect_unix(path, max_frame=DEFAULT_MAX_FRAME)
    except OSError as exc:
        why = f"no world daemon answers at {path}: {exc.strerror or exc}"
        raise world_unavailable(name, why) from None
    hello = {"versions": list(PROTOCOL_VERSIONS), "client": dict(client or {}), "pid": os.getpid()}
    try:
        peer = await connection.handshake(hello, timeout_s=HELLO_TIMEOUT_S)
        version = choose_version(PROTOCOL_VERSIONS, peer.get("versions"))
    except (EOFError, TimeoutError, FrameError, ProtocolError, ConnectionError) as exc:
        connection.close()
        why = getattr(exc, "message", None) or "it closed the connection before its hello"
        raise world_unavailable(name, str(why)) from None
    link = WorldLink(name, connection, None, None)
    link.hello = peer
    link.version = version
    link.start(heartbeat_s)
    return link


async def connect(
    name: str,
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    client: Mapping[str, Any] | None = None,
    heartbeat_s: float | None = None,
) -> WorldLink:
    """Start ``command``, shake hands, and return the live link; ``WORLD_UNAVAILABLE`` else."""
    stderr = _StderrReader()
    # Its stdin and stdout are pipes of our own, read and written through a protocol
    # that decodes in the read callback (:mod:`.wire`), not through a task's streams.
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=child_in,
            stdout=child_out,
            stderr=stderr.write_fd,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    except BaseException as exc:  # no descriptor of ours outlives a spawn that failed
        for fd in (to_child, from_child, stderr.write_fd):
            os.close(fd)
        await stderr.aclose()
        if not isinstance(exc, OSError):
            raise
        why = f"{command[0]!r} could not start: {exc.strerror or exc}"
        raise world_unavailable(name, why) from None
    finally:
        os.close(child_in)
        os.close(child_out)
    await stderr.start()
    connection = await over_pipes(from_child, to_child, max_frame=DEFAULT_MAX_FRAME)
    hello = {"versions": list(PROTOCOL_VERSIONS), "client": dict(client or {}), "pid": os.getpid()}
    try:
        peer = await connection.handshake(hello, timeout_s=HELLO_TIMEOUT_S)
        version = choose_version(PROTOCOL_VERSIONS, peer.get("versions"))
    except asyncio.CancelledError:
        # Cancelled before its hello (a harness closing mid-reconnect): the command goes.
        connection.close()
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        await stderr.aclose()
        raise
    except (EOFError, TimeoutError, FrameError, ProtocolError, ConnectionError) as exc:
        connection.close()
        await _reap(process)
        await stderr.settle(1.0)
        said = stderr.text()
        await stderr.aclose()
        banner = connection.preamble.decode("utf-8", "replace").strip()
        why = {
            EOFError: "it ended before saying hello",
            TimeoutError: f"it did not say hello within {HELLO_TIMEOUT_S:.0f} s",
        }.get(type(exc), getattr(exc, "message", str(exc)))
        if banner:
            why += f" (it printed: {banner[:300]!r})"
        raise world_unavailable(name, why, said) from None
    link = WorldLink(name, connection, process, stderr)
    link.hello = peer
    link.version = version
    link.start(heartbeat_s)
    return link
