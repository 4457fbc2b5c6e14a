"""The stdio transport of ``dsh-terminal mcp``: JSON-RPC lines over fds 0 and 1.

The SDK's own stdio transport blocks shutdown on a read of a silent client; this one
never waits on the client. When a descriptor is a pipe or a socket (what every MCP
client hands its server) it is made non-blocking and served on the event loop itself
(``add_reader``/``add_writer``): a frame costs no thread hop and no memory-stream hop,
only the read, the parse and the write. Anything else (a terminal, a file, stdout
sharing its file with stderr, so that making it non-blocking would change stderr too)
is read or written on a private daemon thread, whose caller simply stops waiting at
shutdown. Either way the SDK gets the same two streams.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import functools
import logging
import os
import queue
import stat
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mcp.shared.message import SessionMessage

__all__ = ["READ_AHEAD", "FrameReader", "FrameWriter", "StdioWire"]

_READ_CHUNK = 64 * 1024
#: Frames waiting for the SDK at which stdin is no longer read until it catches up.
READ_AHEAD = 64
# How long shutdown waits for queued replies to reach a client that stopped reading.
_FLUSH_WAIT_S = 1.0

log = logging.getLogger("dsh_terminal_core.mcp_server")

_T = TypeVar("_T")


class _DaemonCalls:
    """Run blocking calls one at a time on a private daemon thread, awaitably.

    Waiting on a blocked ``read`` of a descriptor cannot be interrupted from Python, and
    the SDK's worker threads are joined at interpreter exit. A daemon thread whose
    caller simply stops waiting is the only way a shutdown never depends on the client.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], Any], asyncio.AbstractEventLoop, asyncio.Future[Any]] | None
        ] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """True while the thread is alive (it may be blocked inside a call)."""
        return self._thread.is_alive()

    async def run(self, call: Callable[[], _T]) -> _T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._jobs.put((call, loop, future))
        return await future

    def close(self) -> None:
        """Let the thread end after its current call."""
        self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, loop, future = job
            try:
                outcome: tuple[bool, Any] = (True, call())
            except BaseException as exc:  # handed to the awaiting caller
                outcome = (False, exc)
            try:
                loop.call_soon_threadsafe(_settle, future, outcome)
            except RuntimeError:
                return  # the loop is gone; nobody is waiting


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    ok, payload = outcome
    if ok:
        future.set_result(payload)
    else:
        future.set_exception(payload)


def _pollable(fd: int) -> bool:
    """A pipe or a socket: epoll can watch it and ``O_NONBLOCK`` is its usual mode."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _same_file(fd: int, other: int) -> bool:
    try:
        a, b = os.fstat(fd), os.fstat(other)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class _Nonblocking:
    """``O_NONBLOCK`` set on a descriptor's open file, and put back as it was."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        if not self._flags & os.O_NONBLOCK:
            fcntl.fcntl(fd, fcntl.F_SETFL, self._flags | os.O_NONBLOCK)

    def restore(self) -> None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(self._fd, fcntl.F_SETFL, self._flags)


class FrameReader:
    """The SDK's read stream over a descriptor: one parsed JSON-RPC message per line.

    ``receive`` returns the next message, or the parse error of a malformed line (a
    ``ValueError``, which the SDK answers as a JSON-RPC parse error), and raises
    ``anyio.EndOfStream`` at end of file or when reading fails (a disconnect). A line
    cut off by end of file is dropped. One task reads at a time (the SDK's).
    ``threaded`` names the daemon thread that reads a descriptor epoll cannot watch;
    ``None`` reads a non-blocking descriptor on the loop.

    On the loop the descriptor stays watched from the first ``receive`` until the
    reader is closed, and each readable event is read and framed in the loop's own
    callback: a request then costs one read, where watching per frame cost a read that
    found nothing, then registering and unregistering the descriptor (two ``epoll_ctl``
    calls). Once :data:`READ_AHEAD` frames wait for the SDK (one read of at most 64 KiB
    may bring more), the descriptor is left unwatched and the rest waits in the pipe
    until the SDK has taken every frame read.
    """

    def __init__(self, fd: int, calls: _DaemonCalls | None = None) -> None:
        self._fd = fd
        self._calls = calls
        self._ready: collections.deque[SessionMessage | Exception] = collections.deque()
        self._pending = bytearray()
        self._eof = False
        self._closed = False
        self._watching: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._failure: Exception | None = None

    async def receive(self) -> SessionMessage | Exception:
        import anyio

        while not self._ready:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._failure is not None:
                failure, self._failure = self._failure, None
                raise failure
            if self._eof:
                raise anyio.EndOfStream
            if self._calls is None:
                await self._readable()
                continue
            try:
                chunk = await self._calls.run(functools.partial(os.read, self._fd, _READ_CHUNK))
            except OSError as exc:
                chunk = self._failed(exc)
            self._take(chunk)
        return self._ready.popleft()

    async def _readable(self) -> None:
        """Wait until the loop's callback has framed something or met end of file."""
        loop = asyncio.get_running_loop()
        if self._watching is None:
            loop.add_reader(self._fd, self._on_readable)
            self._watching = loop
        waiter = self._waiter = loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _on_readable(self) -> None:
        try:
            chunk = os.read(self._fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError as exc:
            chunk = self._failed(exc)
        try:
            self._take(chunk)
        except Exception as exc:  # raised by the next receive, as a read of its own would
            self._failure = exc
            self._eof = True
        if self._eof or len(self._ready) >= READ_AHEAD:
            self._unwatch()
        if self._waiter is not None and not self._waiter.done() and (self._ready or self._eof):
            self._waiter.set_result(None)

    def _failed(self, exc: OSError) -> bytes:
        log.warning("reading stdin failed (%s); treating it as a disconnect", exc)
        return b""

    def _take(self, chunk: bytes) -> None:
        if chunk:
            self._frame(chunk)
        else:
            self._eof = True

    def _unwatch(self) -> None:
        if self._watching is not None:
            with contextlib.suppress(RuntimeError):  # the loop may be closed already
                self._watching.remove_reader(self._fd)
            self._watching = None

    def _frame(self, chunk: bytes) -> None:
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        end = chunk.rfind(b"\n")
        if end < 0:  # inside a long line: kept, and the kept part is never copied again
            self._pending += chunk
            return
        lines = (self._pending + chunk[:end]).split(b"\n")
        self._pending = bytearray(chunk[end + 1 :])
        for line in lines:
            if not line.strip():
                continue
            try:
                self._ready.append(
                    SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                )
            except ValueError as exc:
                self._ready.append(exc)

    async def aclose(self) -> None:
        self._closed = True
        self._unwatch()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> FrameReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> FrameReader:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


class FrameWriter:
    """The SDK's write stream over a descriptor: each message written whole, in order.

    ``send`` returns once its line is written, or, on a non-blocking descriptor whose
    reader is slow, once every line before and including it is; a sender cancelled
    while waiting leaves its line queued whole, so the stream never carries half a
    frame. When the descriptor breaks (the client is gone) ``on_broken`` is called once
    and every later ``send`` raises ``anyio.BrokenResourceError``.
    """

    def __init__(
        self, fd: int, on_broken: Callable[[], None], calls: _DaemonCalls | None = None
    ) -> None:
        self._fd = fd
        self._calls = calls
        self._on_broken = on_broken
        self._backlog = bytearray()
        self._drained = asyncio.Event()
        self._drained.set()
        self._broken = False
        self._closed = False

    @property
    def idle(self) -> bool:
        """Nothing is queued (everything sent is written, or the stream broke)."""
        return self._drained.is_set()

    async def wait_idle(self) -> None:
        await self._drained.wait()

    async def send(self, message: SessionMessage, /) -> None:
        import anyio

        if self._broken:
            raise anyio.BrokenResourceError
        if self._closed:
            raise anyio.ClosedResourceError
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        if self._calls is not None:
            try:
                await self._calls.run(functools.partial(_write_all, self._fd, data))
            except OSError as exc:
                self._break(exc)
                raise anyio.BrokenResourceError from exc
            return
        if self._drained.is_set():
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                written = 0
            except OSError as exc:
                self._break(exc)
                raise anyio.BrokenResourceError from exc
            if written == len(data):
                return
            data = data[written:]
            self._drained.clear()
            asyncio.get_running_loop().add_writer(self._fd, self._flush)
        self._backlog += data
        await self._drained.wait()
        if self._broken:
            raise anyio.BrokenResourceError

    def _flush(self) -> None:
        try:
            written = os.write(self._fd, self._backlog)
        except BlockingIOError:
            return
        except OSError as exc:
            self._break(exc)
            return
        del self._backlog[:written]
        if not self._backlog:
            asyncio.get_running_loop().remove_writer(self._fd)
            self._drained.set()

    def _break(self, exc: OSError) -> None:
        if self._broken:
            return
        self._broken = True
        log.info("stdout is closed (%s)", exc.strerror or exc)
        if self._calls is None:
            self.abandon()
        self._on_broken()

    def abandon(self) -> None:
        """Stop writing what is queued (shutdown, once the wait for the client is over)."""
        if not self._drained.is_set():
            asyncio.get_running_loop().remove_writer(self._fd)
            self._backlog.clear()
            self._drained.set()

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> FrameWriter:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()


class StdioWire:
    """Newline-delimited JSON-RPC on the process's stdin and stdout, as the SDK's streams.

    Entering moves the wire to private descriptors and points fd 0 at ``/dev/null`` and
    fd 1 at stderr; leaving restores them (and the descriptors' blocking mode).
    ``receive`` yields parsed messages (or the parse error, which the SDK answers) and
    ends at stdin EOF; everything sent on ``send`` is written to stdout in order.
    ``on_broken`` is called once if stdout breaks (the client is gone). Leaving waits at
    most a second for replies still queued for a client that stopped reading, and never
    for a client that stopped writing.
    """

    receive: FrameReader
    send: FrameWriter

    def __init__(self) -> None:
        self.on_broken: Callable[[], None] = lambda: None
        self._threads: list[_DaemonCalls] = []
        self._nonblocking: list[_Nonblocking] = []

    async def __aenter__(self) -> StdioWire:
        self._in_fd, self._out_fd = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        try:
            os.dup2(null, 0)
            try:
                os.dup2(2, 1)
            except OSError:  # no stderr at all: discard stray output instead
                os.dup2(null, 1)
        finally:
            os.close(null)
        self._reader = self._calls_for(self._in_fd, "dsh-mcp-stdin", True)
        # Shared with stderr, O_NONBLOCK would make our own log writes fail with EAGAIN.
        self._writer = self._calls_for(
            self._out_fd, "dsh-mcp-stdout", not _same_file(self._out_fd, 2)
        )
        self.receive = FrameReader(self._in_fd, self._reader)
        self.send = FrameWriter(self._out_fd, lambda: self.on_broken(), self._writer)
        return self

    def _calls_for(self, fd: int, name: str, may_poll: bool) -> _DaemonCalls | None:
        if may_poll and _pollable(fd):
            with contextlib.suppress(OSError):
                self._nonblocking.append(_Nonblocking(fd))
                return None
        calls = _DaemonCalls(name)
        self._threads.append(calls)
        return calls

    async def __aexit__(self, *_exc: object) -> None:
        await self.receive.aclose()
        # Let replies already queued reach the client before it is cut off.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.send.wait_idle(), _FLUSH_WAIT_S)
        self.send.abandon()
        await self.send.aclose()
        for calls in self._threads:
            calls.close()
        for mode in self._nonblocking:
            mode.restore()
        with contextlib.suppress(OSError):
            os.dup2(self._in_fd, 0)
            os.dup2(self._out_fd, 1)
        # A thread still blocked on a descriptor must never see its number reused.
        if self._reader is None or not self._reader.busy:
            os.close(self._in_fd)
        if self._writer is None or not self._writer.busy:
            os.close(self._out_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
