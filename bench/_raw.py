"""The raw floor: ptyprocess + bash + the marker protocol, no framework.

An asyncio reader on the non-blocking master reads 64 KiB chunks and keeps only the
newest bytes; a send settles the moment those end with the marker and the prompt (or
``>>>`` in a REPL). No process inspection, no sanitizing, no scrollback: the least any
implementation of the same protocol can do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from itertools import count

from _env import SHELL_ARGV, Expect, bench_environment, prompt_settled
from ptyprocess import PtyProcess

__all__ = ["RawDriver", "RawSession"]

_CHUNK = 64 * 1024
_TAIL = 256


class RawSession:
    """One bash on one PTY, read by a loop callback."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd
        self.received = 0
        self._loop = loop
        self._tail = b""
        self._want: Callable[[bytes], bool] | None = None
        self._waiter: asyncio.Future[None] | None = None
        loop.add_reader(fd, self._on_readable)

    def expect(self, expect: Expect) -> asyncio.Future[None]:
        """Forget earlier output and return a future resolved at the next prompt."""
        self._tail = b""
        self._waiter = self._loop.create_future()
        self._want = lambda tail: prompt_settled(tail, expect)
        return self._waiter

    def _on_readable(self) -> None:
        for _ in range(16):
            try:
                chunk = os.read(self.fd, _CHUNK)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._loop.remove_reader(self.fd)
                if self._waiter is not None and not self._waiter.done():
                    self._waiter.set_exception(EOFError("the shell hung up"))
                return
            self.received += len(chunk)
            self._tail = (self._tail + chunk[-_TAIL:])[-_TAIL:]
        waiter = self._waiter
        want = self._want
        if waiter is not None and not waiter.done() and want is not None and want(self._tail):
            waiter.set_result(None)

    def close(self) -> None:
        """SIGKILL the foreground job and the shell, reap the shell, close the master."""
        with contextlib.suppress(OSError):
            self._loop.remove_reader(self.fd)
        with contextlib.suppress(OSError):
            pgid = os.tcgetpgrp(self.fd)
            if pgid > 0 and pgid != self.pid:
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
        with contextlib.suppress(OSError):
            os.close(self.fd)


class RawDriver:
    """Opens, drives and closes raw sessions; closes leftovers in :meth:`aclose`."""

    name = "raw"
    concurrent = True
    session_class: type[RawSession] = RawSession

    def __init__(self, owner_id: str) -> None:
        self._owner_id = owner_id
        self._ids = count(1)
        self._live: dict[int, RawSession] = {}

    async def open(self) -> RawSession:
        loop = asyncio.get_running_loop()
        env = bench_environment(self._owner_id, f"raw-{next(self._ids)}")
        proc = PtyProcess.spawn(SHELL_ARGV, env=env, dimensions=(40, 160))
        fd = os.dup(proc.fd)
        proc.fileobj.close()
        proc.closed = True  # we own pid and fd from here on
        os.set_blocking(fd, False)
        session = self.session_class(loop, proc.pid, fd)
        self._live[proc.pid] = session
        try:
            await asyncio.wait_for(session.expect("prompt"), 30)
        except BaseException:
            await self.close(session)
            raise
        return session

    async def send(self, session: RawSession, text: str, expect: Expect = "prompt") -> str | None:
        settled = session.expect(expect)
        os.write(session.fd, text.encode() + b"\r")
        await asyncio.wait_for(settled, 60)
        return None

    async def close(self, session: RawSession) -> None:
        self._live.pop(session.pid, None)
        session.close()

    async def aclose(self) -> None:
        for session in list(self._live.values()):
            await self.close(session)
