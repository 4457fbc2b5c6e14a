"""The stdio transport of ``dsh-terminal mcp``: JSON-RPC lines over fds 0 and 1.

The SDK's own stdio transport blocks shutdown on a read of a silent client; this one
reads and writes on daemon threads, so a signal or a disconnect never waits on stdin.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage

__all__ = ["StdioWire"]

_READ_CHUNK = 64 * 1024
# How long shutdown waits for queued replies to reach a client that stopped reading.
_FLUSH_WAIT_S = 1.0

log = logging.getLogger("dsh_terminal_core.mcp_server")

_T = TypeVar("_T")


class _DaemonCalls:
    """Run blocking calls one at a time on a private daemon thread, awaitably.

    Waiting on a blocked ``read`` of a pipe cannot be interrupted from Python, and the
    SDK's worker threads are joined at interpreter exit. A daemon thread whose caller
    simply stops waiting is the only way a shutdown never depends on the client.
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


class StdioWire:
    """Newline-delimited JSON-RPC on the process's stdin and stdout, as SDK memory streams.

    Entering moves the wire to private descriptors and points fd 0 at ``/dev/null`` and
    fd 1 at stderr; leaving restores them. ``receive`` yields parsed messages (or the
    parse error, which the SDK answers) and closes at stdin EOF; everything sent on
    ``send`` is written to stdout in order. ``on_broken`` is called once if stdout
    breaks (the client is gone).
    """

    receive: MemoryObjectReceiveStream[SessionMessage | Exception]
    send: MemoryObjectSendStream[SessionMessage]

    def __init__(self) -> None:
        self.on_broken: Callable[[], None] = lambda: None
        self._tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> StdioWire:
        import anyio
        from mcp.shared.message import SessionMessage

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
        self._reader = _DaemonCalls("dsh-mcp-stdin")
        self._writer = _DaemonCalls("dsh-mcp-stdout")
        inbound_send, self.receive = anyio.create_memory_object_stream[SessionMessage | Exception](
            0
        )
        self.send, outbound_receive = anyio.create_memory_object_stream[SessionMessage](0)
        self._tasks = [
            asyncio.create_task(self._pump_in(inbound_send)),
            asyncio.create_task(self._pump_out(outbound_receive)),
        ]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        pump_in, pump_out = self._tasks
        pump_in.cancel()
        # Let replies already handed to the writer reach the client before it is cut off.
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({pump_out}, timeout=_FLUSH_WAIT_S)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._reader.close()
        self._writer.close()
        with contextlib.suppress(OSError):
            os.dup2(self._in_fd, 0)
            os.dup2(self._out_fd, 1)
        # A thread still blocked on a descriptor must never see its number reused.
        if not self._reader.busy:
            os.close(self._in_fd)
        if not self._writer.busy:
            os.close(self._out_fd)

    async def _pump_in(self, sink: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        fd = self._in_fd
        pending = b""
        async with sink:
            while True:
                try:
                    chunk = await self._reader.run(functools.partial(os.read, fd, _READ_CHUNK))
                except OSError as exc:
                    log.warning("reading stdin failed (%s); treating it as a disconnect", exc)
                    return
                if not chunk:
                    return
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    item: SessionMessage | Exception
                    try:
                        item = SessionMessage(
                            types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        )
                    except ValueError as exc:
                        item = exc
                    try:
                        await sink.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        return

    async def _pump_out(self, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
        fd = self._out_fd
        async with source:
            async for message in source:
                line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                data = (line + "\n").encode()
                try:
                    await self._writer.run(functools.partial(_write_all, fd, data))
                except OSError as exc:
                    log.info("stdout is closed (%s)", exc.strerror or exc)
                    self.on_broken()
                    return


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
