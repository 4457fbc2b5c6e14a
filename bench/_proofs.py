"""The raw floor plus the prompt tier's proofs: the least a proven ``stdin_read`` costs.

The raw reader settles the moment the newest bytes end with the marker and the prompt.
Our stack may only call such a send ``stdin_read`` once it has proven more, and this
contender makes the same proofs with nothing around them:

* at the write (the write fence): the master is drained, so no marker produced before
  the input counts; the foreground group is read (the stack remembers the wake counts
  of the shell and of the foreground group); the shell's wake count (the CPU time plus
  the time slices of its scheduler statistics) is remembered.
* at the marker and prompt: (1) no input byte waits unread on the terminal (the slave
  peer, opened through ``TIOCGPTPEER``, polled so the flip buffer is flushed, then
  ``FIONREAD``); (2) the foreground group is the shell's; (3) the shell, single-threaded,
  is blocked in ``pselect6`` on fd 0 alone with no timeout, fd 0 is this terminal, its
  scheduler statistics are the same on both sides of that look (one wait) and its wake
  count moved since the write (the wait is new); (4) no output is pending, in flight
  inside the PTY layer included. The stack reads that with ``FIONREAD`` and, when it
  says 0, a non-blocking read (which flushes the flip buffer); one ``poll`` on the master
  answers the same in one call: it flushes the flip buffer before it looks, and the
  master's own line settings (not canonical, VMIN 1; ``tcsetattr`` on a master changes
  the slave's) make its ``POLLIN`` exactly "a byte is queued".

A look that fails is repeated 1 ms later and on new output. The shell's ``schedstat``,
``syscall`` and ``mem`` stay open across sends and are read with ``pread``, as the stack
keeps them. Only the shell's own prompt is proven (x86_64 and aarch64); a REPL's ``>>>``
settles as on the raw floor, since the stack proves it with another tier.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import platform
import select
import termios

from _env import Expect, prompt_settled
from _raw import RawDriver, RawSession

__all__ = ["ProofsDriver"]

_TIOCGPTPEER = 0x5441
_PEER_FLAGS = os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK
_ZERO = b"\0\0\0\0"
_PSELECT6 = {"x86_64": b"270", "aarch64": b"72"}.get(platform.machine())
_ONE_FD = b"0x1"
_NULL = b"0x0"
_RETRY_S = 0.001


class ProofsSession(RawSession):
    """A raw session whose prompt sends settle only once the shell is proven reading."""

    def __init__(self, loop: asyncio.AbstractEventLoop, pid: int, fd: int) -> None:
        super().__init__(loop, pid, fd)
        self.looks = 0
        self._kept: tuple[int, int, int] | None = None
        self._rdev = -1
        self._task = f"/proc/{pid}/task"
        self._stdin = f"/proc/{pid}/fd/0"
        self._output = select.poll()
        self._output.register(fd, select.POLLIN)
        self._ran_at_write = 0
        self._retry: asyncio.TimerHandle | None = None

    def keep_files(self) -> None:
        """Learn the terminal's device and keep the shell's ``/proc`` files open.

        Called after the first prompt, when the shell has long since exec'd (a ``mem``
        opened before an exec reads nothing after it).
        """
        if _PSELECT6 is None:
            raise RuntimeError(f"no pselect6 number known for {platform.machine()}")
        peer = fcntl.ioctl(self.fd, _TIOCGPTPEER, _PEER_FLAGS)
        try:
            self._rdev = os.fstat(peer).st_rdev
        finally:
            os.close(peer)
        task = f"{self._task}/{self.pid}"
        opened: list[int] = []
        try:
            for path in (f"{task}/schedstat", f"{task}/syscall", f"/proc/{self.pid}/mem"):
                opened.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            for fd in opened:
                os.close(fd)
            raise
        self._kept = (opened[0], opened[1], opened[2])

    def expect(self, expect: Expect) -> asyncio.Future[None]:
        """Fence the write and return a future resolved at the next proven prompt."""
        kept = self._kept
        if expect != "prompt" or kept is None:
            return super().expect(expect)
        self._on_readable()  # the write fence: whatever the master holds came before it
        waiter = super().expect(expect)
        self._want = self._proven_prompt
        self.looks = 0
        # Paid as the stack pays it, which also remembers the foreground group's count (a
        # shell started inside the shell may print the prompt); the floor proves only the
        # session's own shell, so the shell's count is the one it keeps.
        os.tcgetpgrp(self.fd)
        self._ran_at_write = _wakes(os.pread(kept[0], 64, 0))
        return waiter

    def _proven_prompt(self, tail: bytes) -> bool:
        if not prompt_settled(tail, "prompt"):
            return False
        self.looks += 1
        if self._proven():
            if self._retry is not None:
                self._retry.cancel()
                self._retry = None
            return True
        if self._retry is None:
            self._retry = self._loop.call_later(_RETRY_S, self._look_again)
        return False

    def _look_again(self) -> None:
        self._retry = None
        waiter = self._waiter
        if waiter is not None and not waiter.done() and self._proven_prompt(self._tail):
            waiter.set_result(None)

    def _proven(self) -> bool:
        """One look: input consumed, shell in the foreground, in a new read wait, no output."""
        assert self._kept is not None
        schedstat, syscall, mem = self._kept
        fd = self.fd
        try:
            peer = fcntl.ioctl(fd, _TIOCGPTPEER, _PEER_FLAGS)
            try:
                poller = select.poll()
                poller.register(peer, select.POLLIN)
                poller.poll(0)  # flushes input still in the flip buffer into the queue
                if fcntl.ioctl(peer, termios.FIONREAD, _ZERO) != _ZERO:
                    return False
            finally:
                os.close(peer)
            if os.tcgetpgrp(fd) != self.pid:
                return False
            if os.stat(self._task).st_nlink != 3:  # not a single thread: one look is not proof
                return False
            ran = os.pread(schedstat, 64, 0)
            # nr nfds readfds writefds exceptfds timeout sigmask sp pc; a stack pointer
            # above 4 GiB is a 64-bit task's, whose numbers are the native table's.
            call = os.pread(syscall, 128, 0).split()
            if (
                call[0] != _PSELECT6
                or call[1] != _ONE_FD
                or call[3] != _NULL
                or call[4] != _NULL
                or call[5] != _NULL
                or len(call[7]) <= 10
                or not os.pread(mem, 1, int(call[2], 16))[0] & 1
                or os.stat(self._stdin).st_rdev != self._rdev
                or os.pread(schedstat, 64, 0) != ran
                or _wakes(ran) <= self._ran_at_write
            ):
                return False
        except (OSError, IndexError, ValueError):
            return False
        return not self._output.poll(0)

    def close(self) -> None:
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
        kept, self._kept = self._kept, None
        for fd in kept or ():
            with contextlib.suppress(OSError):
                os.close(fd)
        super().close()


def _wakes(schedstat: bytes) -> int:
    """CPU time plus time slices: moves whenever the thread ran, even where a virtual
    machine's task clock stood still (see ``taskfacts.wake_count``)."""
    runtime, _delay, slices = schedstat.split()
    return int(runtime) + int(slices)


class ProofsDriver(RawDriver):
    """The raw driver whose prompt sends settle as proven ``stdin_read``.

    ``retried`` counts the prompt sends that needed more than one look.
    """

    name = "proofs"
    session_class = ProofsSession

    def __init__(self, owner_id: str) -> None:
        super().__init__(owner_id)
        self.retried = 0

    async def open(self) -> RawSession:
        session = await super().open()
        assert isinstance(session, ProofsSession)
        try:
            session.keep_files()
        except BaseException:
            await self.close(session)
            raise
        return session

    async def send(self, session: RawSession, text: str, expect: Expect = "prompt") -> str | None:
        await super().send(session, text, expect)
        if expect != "prompt":
            return None
        assert isinstance(session, ProofsSession)
        if session.looks > 1:
            self.retried += 1
        return "stdin_read"
