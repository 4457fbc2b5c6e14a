"""The harness's side of the recorder process: batched operations out, replies in.

Operations are appended to a batch on the event loop (a tuple each, no encoding) and
handed to the process as one frame at least every :data:`FLUSH_INTERVAL_S` and whenever
:data:`FLUSH_BYTES` of data are waiting. A frame is ``>II`` (the lengths of the two
parts), the operations :mod:`marshal`-ed with each one's data replaced by its length,
then the data, which is never copied here: the frame goes out with one ``writev`` of the
chunks as the terminal delivered them. Writes never block: what the pipe does not take
waits for the loop to say it is writable. Replies — a file opened, closed, cut at
``max_bytes``, failed — come back through a reader on the loop.

If the process falls :data:`MAX_BACKLOG` bytes behind, or dies, every recording ends with
an error log line; the sessions never notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import marshal
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["FLUSH_BYTES", "FLUSH_INTERVAL_S", "MAX_BACKLOG", "RecorderLink", "recorder_script"]

log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 0.5
FLUSH_BYTES = 256 * 1024
MAX_BACKLOG = 64 * 1024 * 1024
_PIPE_BYTES = 1024 * 1024
_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_EXIT_WAIT_S = 10.0
_LENGTHS = struct.Struct(">II")
_IOV_MAX = 512

Reply = Callable[[dict[str, Any]], None]


def recorder_script() -> Path:
    """The recorder process's script (standard library only)."""
    return Path(__file__).with_name("recorder_process.py")


class RecorderLink:
    """One recorder process and the pipe to it; ``on_reply`` gets each reply on the loop."""

    def __init__(self, on_reply: Reply, on_lost: Callable[[str], None]) -> None:
        self._on_reply = on_reply
        self._on_lost = on_lost
        self._loop = asyncio.get_running_loop()
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(recorder_script())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,  # the harness's Ctrl-C is not the recorder's
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._out = self._process.stdin.fileno()
        self._in = self._process.stdout.fileno()
        os.set_blocking(self._out, False)
        os.set_blocking(self._in, False)
        with contextlib.suppress(OSError):  # fewer, larger writes where the kernel allows
            fcntl.fcntl(self._out, _F_SETPIPE_SZ, _PIPE_BYTES)
        self._batch: list[tuple[Any, ...]] = []
        self._chunks: list[bytes] = []
        self._batch_bytes = 0
        self._backlog: list[memoryview] = []
        self._backlog_bytes = 0
        self._writing = False
        self._replies = bytearray()
        self._lost: str | None = None
        self._ended: asyncio.Future[None] = self._loop.create_future()
        self._drained: asyncio.Future[None] | None = None
        self._closing = False
        self._loop.add_reader(self._in, self._read_replies)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def lost(self) -> bool:
        return self._lost is not None

    def submit(self, op: tuple[Any, ...], data: bytes | None = None) -> None:
        """Queue ``op`` for the next frame; ``data`` travels as its last field."""
        if self._lost is not None:
            return
        if data is None:
            self._batch.append(op)
            return
        self._batch.append((*op, len(data)))
        self._chunks.append(data)
        self._batch_bytes += len(data)
        if self._batch_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        """Hand the queued operations to the process as one frame."""
        if not self._batch or self._lost is not None:
            return
        meta = marshal.dumps(self._batch)
        head = _LENGTHS.pack(len(meta), self._batch_bytes)
        self._backlog += [memoryview(head), memoryview(meta)]
        self._backlog += map(memoryview, self._chunks)
        self._backlog_bytes += len(head) + len(meta) + self._batch_bytes
        self._batch = []
        self._chunks = []
        self._batch_bytes = 0
        if self._backlog_bytes > MAX_BACKLOG:
            self._lose(f"the recorder process fell {self._backlog_bytes} bytes behind")
            return
        if not self._writing:
            self._write()

    def _write(self) -> None:
        backlog = self._backlog
        while backlog:
            try:
                written = os.writev(self._out, backlog[:_IOV_MAX])
            except BlockingIOError:
                break
            except OSError as exc:
                self._lose(f"the recorder process stopped reading ({exc.strerror or exc})")
                return
            self._backlog_bytes -= written
            done = 0
            while done < len(backlog) and written >= len(backlog[done]):
                written -= len(backlog[done])
                done += 1
            del backlog[:done]
            if written:
                backlog[0] = backlog[0][written:]
                break  # the pipe took part of a chunk: it is full
        if backlog and not self._writing:
            self._writing = True
            self._loop.add_writer(self._out, self._on_writable)
        elif not backlog:
            if self._writing:
                self._writing = False
                self._loop.remove_writer(self._out)
            if self._drained is not None and not self._drained.done():
                self._drained.set_result(None)

    def _on_writable(self) -> None:
        self._write()

    def _read_replies(self) -> None:
        try:
            data = os.read(self._in, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._loop.remove_reader(self._in)
            if not self._ended.done():
                self._ended.set_result(None)
            if self._lost is None and not self._closing:
                self._lose("the recorder process exited")
            return
        self._replies += data
        *lines, rest = self._replies.split(b"\n")
        self._replies = bytearray(rest)
        for line in lines:
            try:
                reply = json.loads(line)
            except ValueError:
                continue
            if isinstance(reply, dict):
                self._on_reply(reply)

    def _lose(self, why: str) -> None:
        if self._lost is not None:
            return
        self._lost = why
        self._batch.clear()
        self._chunks.clear()
        self._backlog.clear()
        self._backlog_bytes = 0
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._out)
        self._on_lost(why)

    async def aclose(self) -> None:
        """Hand over what is queued, end the input, and wait for the process to finish."""
        self.flush()
        if self._backlog and self._lost is None:
            self._drained = self._loop.create_future()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained, _EXIT_WAIT_S)
        self._closing = True
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._out)
        assert self._process.stdin is not None
        with contextlib.suppress(OSError):
            self._process.stdin.close()  # end of input: the process closes every file
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._ended), _EXIT_WAIT_S)
        if not self._ended.done():
            self._loop.remove_reader(self._in)
        await self._reap()
        assert self._process.stdout is not None
        self._process.stdout.close()

    async def _reap(self) -> None:
        deadline = self._loop.time() + _EXIT_WAIT_S
        while self._process.poll() is None:
            if self._loop.time() > deadline:
                log.error("the recorder process did not exit; killing it")
                self._process.kill()
                await asyncio.to_thread(self._process.wait)
                return
            await asyncio.sleep(0.01)
