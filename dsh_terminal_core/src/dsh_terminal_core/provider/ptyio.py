"""Byte transport over a non-blocking PTY master, driven by the event loop.

Output: the loop calls us when the master is readable; we read big chunks until the
kernel has nothing more (or a bound is reached) and hand what one wakeup read to the
output handler as one chunk (or buffer it until one is set). After a short read,
"nothing more" is asked with a poll, not found by a read failing with EAGAIN: the poll
takes in bytes still in the kernel's hand-over just as the read would, and costs less
than raising. Reading stops for good at EIO/EOF — Linux reports EIO once every slave
descriptor is closed, and a master left registered would then be "readable" forever.

Input: a PTY accepts only a few KB while the program on it is not reading, so a write is
done in pieces: ``os.write`` takes what fits, and on EAGAIN we wait for writability with a
loop writer callback. Writers are serialised so two sends never interleave; a cancelled
write drops the rest of its data.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import select
import struct
import termios

from ..kernel.errors import TerminalError
from .types import OutputHandler

__all__ = ["PtyChannel"]

READ_CHUNK = 64 * 1024
_READS_PER_WAKEUP = 16  # bounds one callback so other sessions get their turn
_SHORT_READ = 1024  # a read below this asks poll before the next (see _read_batch)
DRAIN_LIMIT = 8 * 1024 * 1024  # a descendant that never stops writing cannot stall exit


class PtyChannel:
    """Reads and writes one PTY master; owns and eventually closes the descriptor."""

    def __init__(self, loop: asyncio.AbstractEventLoop, master_fd: int) -> None:
        self._loop = loop
        self._fd: int | None = master_fd
        self._handler: OutputHandler | None = None
        self._pending: list[bytes] = []
        self._reading = False
        self._eof = False
        self._write_lock = asyncio.Lock()
        self._write_waiter: asyncio.Future[None] | None = None
        self._poller: select.poll | None = None  # for pending(), made on first use

    @property
    def fd(self) -> int | None:
        """The master descriptor, or None once closed."""
        return self._fd

    @property
    def eof(self) -> bool:
        """True once the master reported EIO/EOF: no slave descriptor is open any more."""
        return self._eof

    def start(self) -> None:
        """Start delivering output; call once, on the loop's thread."""
        if self._fd is not None and not self._reading and not self._eof:
            self._loop.add_reader(self._fd, self._on_readable)
            self._reading = True

    def set_handler(self, handler: OutputHandler | None) -> None:
        """Deliver output to ``handler``; output buffered so far is flushed to it first.

        The flush happens synchronously, inside this call, as one joined chunk. ``None``
        detaches the handler; output is then buffered again.
        """
        self._handler = handler
        if handler is not None and self._pending:
            buffered = b"".join(self._pending)
            self._pending.clear()
            self._deliver(buffered)

    def pending(self) -> int:
        """Bytes not yet handed to a handler when called: buffered here, queued on the
        master, or still in flight inside the PTY layer.

        A PTY passes a program's writes to the master through a kernel work queue, so
        right after a write ``FIONREAD`` alone can still say 0. A poll of the master
        decides first: with nothing queued, the line discipline's poll flushes that work
        before it answers, so "not readable" means nothing is on its way; otherwise
        ``FIONREAD`` counts what is queued, which is more than 0 (bytes still in flight
        behind it may be missing from the count). One system call in the usual case,
        where nothing is pending.
        """
        buffered = sum(len(chunk) for chunk in self._pending) if self._pending else 0
        fd = self._fd
        if fd is None or self._eof:
            return buffered
        try:
            if not any(events & select.POLLIN for _fd, events in self._poll(fd)):
                return buffered
            raw = fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return buffered
        return buffered + int(struct.unpack("i", raw)[0])

    def _poll(self, fd: int) -> list[tuple[int, int]]:
        """The master's events now, after the line discipline flushed what is in flight."""
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(fd, select.POLLIN)
        return poller.poll(0)

    def _nothing_to_read(self) -> bool:
        """Nothing queued, in flight or ended on the master: a read would only fail with
        EAGAIN. Asked by poll, which costs less than a read that raises."""
        fd = self._fd
        if fd is None or self._eof:
            return True
        try:
            return not self._poll(fd)
        except OSError:
            return False  # let the read find out

    def drain(self, limit: int = DRAIN_LIMIT) -> None:
        """Read and deliver what is readable now, up to about ``limit`` bytes; never blocks."""
        if self._nothing_to_read():
            return
        taken = 0
        while taken < limit:
            delivered = self._read_batch()
            if not delivered:
                return
            taken += delivered

    async def write(self, data: bytes) -> None:
        """Write all of ``data``, waiting for the reader to make room; never blocks the loop.

        Raises:
            TerminalError: ``TERMINAL_CLOSED`` if the master is closed or the slave side
                is gone before everything was written.
            asyncio.CancelledError: the unwritten remainder is dropped.
        """
        async with self._write_lock:
            view = memoryview(data)
            while view:
                written = self._write_once(view)
                if written:
                    view = view[written:]
                else:
                    await self._writable(self._require_fd())

    def write_now(self, data: bytes) -> int:
        """Write what the terminal takes of ``data`` at once, without waiting; return the count.

        0 when another write is in progress (its turn comes first). A caller that gets
        less than all of ``data`` writes the rest with :meth:`write` before anything else.

        Raises:
            TerminalError: ``TERMINAL_CLOSED`` if the master is closed or the slave side
                is gone.
        """
        if self._write_lock.locked() or not data:
            return 0
        return self._write_once(data)

    def _write_once(self, data: bytes | memoryview) -> int:
        """One non-blocking write; 0 when the terminal has no room now."""
        fd = self._require_fd()
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError as exc:
            raise TerminalError(
                f"cannot write to the terminal: {exc.strerror}", "TERMINAL_CLOSED"
            ) from exc

    def resize(self, rows: int, cols: int) -> None:
        """Set the window size; the kernel sends SIGWINCH to the foreground group."""
        fd = self._require_fd()
        try:
            termios.tcsetwinsize(fd, (rows, cols))
        except (OSError, termios.error) as exc:
            raise TerminalError(f"cannot resize the terminal: {exc}", "TERMINAL_CLOSED") from exc

    def close(self) -> None:
        """Stop reading, fail a pending write and close the master; idempotent."""
        fd, self._fd = self._fd, None
        # The handler is usually a method of an owner that holds this channel: dropping
        # it lets a closed terminal be freed at once, not by a collector pass.
        self._handler = None
        self._poller = None
        if fd is None:
            return
        self._stop_reading(fd)
        waiter, self._write_waiter = self._write_waiter, None
        if waiter is not None and not waiter.done():
            with contextlib.suppress(Exception):
                self._loop.remove_writer(fd)
            waiter.set_exception(TerminalError("the terminal was closed", "TERMINAL_CLOSED"))
        os.close(fd)

    def _require_fd(self) -> int:
        if self._fd is None:
            raise TerminalError("the terminal is closed", "TERMINAL_CLOSED")
        return self._fd

    async def _writable(self, fd: int) -> None:
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._write_waiter = waiter
        self._loop.add_writer(fd, _wake, waiter)
        try:
            await waiter
        finally:
            if self._write_waiter is waiter:
                self._write_waiter = None
                self._loop.remove_writer(fd)

    def _on_readable(self) -> None:
        self._read_batch()

    def _read_batch(self) -> int:
        """Read what is readable (a bounded number of reads) and deliver it as one chunk.

        A PTY hands over at most a few KB per read while a fast writer refills it as
        quickly, so one wakeup often finds many reads' worth; delivering them together
        pays the consumer's per-chunk cost once. Returns the number of bytes delivered.
        """
        first = self._read_once()
        if not first:
            return 0
        chunks = [first]
        last = first
        for _ in range(_READS_PER_WAKEUP - 1):
            # A short read usually emptied the queue: a poll asks for more at less cost
            # than a read that fails. A long one usually has more behind it.
            if len(last) < _SHORT_READ and self._nothing_to_read():
                break
            last = self._read_once()
            if not last:
                break
            chunks.append(last)
        data = first if len(chunks) == 1 else b"".join(chunks)
        self._deliver(data)
        return len(data)

    def _read_once(self) -> bytes:
        """Read one chunk; b"" when nothing is readable or reading ended."""
        fd = self._fd
        if fd is None or self._eof:
            return b""
        try:
            chunk = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return b""
        except OSError as exc:
            if exc.errno not in (errno.EIO, errno.EBADF):
                self._loop.call_exception_handler(
                    {"message": "unexpected error reading a PTY master", "exception": exc}
                )
            chunk = b""
        if not chunk:
            self._eof = True
            self._stop_reading(fd)
            return b""
        return chunk

    def _stop_reading(self, fd: int) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(fd)

    def _deliver(self, chunk: bytes) -> None:
        handler = self._handler
        if handler is None:
            self._pending.append(chunk)
            return
        try:
            handler(chunk)
        except Exception as exc:  # a consumer bug must not stop the terminal's output
            self._loop.call_exception_handler(
                {"message": "terminal output handler raised", "exception": exc}
            )


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
