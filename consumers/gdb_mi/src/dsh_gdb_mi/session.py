"""A gdb process in MI mode on a ``ctx.pty`` session, driven command by command.

Everything goes through the protocol-free facade: ``open`` starts gdb in a shell,
``send`` writes a command (and returns once gdb waits for input again, which the bash
backend detects exactly because gdb blocks in ``poll`` on the terminal), and ``tail``
gives the complete lines since the previous read. Lines are framed into records here,
never in the facade, and the tail cursor — not the output of each send — is the source
of truth: a ``*stopped`` that arrives between two sends is only in the tail.

To wait for output gdb has not produced yet, the session sends empty input with
``submit=False``: that writes nothing and returns when gdb has been woken and is waiting
again, or when the backend's silence or deadline bound elapses. It never interrupts gdb.
"""

from __future__ import annotations

import asyncio
import itertools
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dsh_pty_session import PtySessionService
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.errors import DshError

from .framer import MiFramer
from .records import MiRecord, RecordKind

__all__ = ["GdbMiError", "GdbMiSession"]

# Tail budget per read: far above what one response prints, so only the backend's own
# scrollback bound can lose lines.
_TAIL_LINES = 1_000_000


class GdbMiError(DshError):
    """gdb could not be started, exited, or did not answer in time."""

    code = "GDB_MI"


class GdbMiSession:
    """One gdb (``-i=mi2``) owned by ``owner``; commands run one at a time.

    Use :meth:`open` to create one. Not thread-safe; concurrent coroutines are
    serialized by an internal lock, since a PTY session takes one send at a time.
    """

    def __init__(
        self,
        pty: PtySessionService,
        owner: Agent,
        session_id: str,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._pty = pty
        self._owner = owner
        self._session_id = session_id
        self._framer = MiFramer()
        self._tokens = itertools.count(1)
        self._lock = asyncio.Lock()
        self._clock = clock or asyncio.get_running_loop().time
        self._exited = False
        self._closed = False
        self.banner: list[MiRecord] = []

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def owner(self) -> Agent:
        return self._owner

    @property
    def alive(self) -> bool:
        """False once gdb exited or the session was closed."""
        return not (self._exited or self._closed)

    @classmethod
    async def open(
        cls,
        pty: PtySessionService,
        owner: Agent,
        *,
        gdb: str = "gdb",
        args: Sequence[str] = (),
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        cancel: Cancellation | None = None,
        timeout: float = 30.0,
    ) -> GdbMiSession:
        """Start ``gdb -q -i=mi2 [args]`` and wait for its first prompt.

        The shell exits with gdb (``; exit``), so a gdb that is missing or quits shows
        up as an exited session instead of a shell prompt nobody reads. Raises
        :class:`GdbMiError` if gdb does not reach its prompt; the session is closed then.
        """
        argv = [gdb, "-q", "-i=mi2", *args]
        request: dict[str, Any] = {"command": f"{shlex.join(argv)}; exit"}
        if cwd is not None:
            request["cwd"] = cwd
        if env:
            request["env"] = dict(env)
        opened = await pty.open(owner, request, cancel, opened_by="gdb_mi")
        session = cls(pty, owner, opened.session_id)
        try:
            if opened.status.kind == "exited":
                raise GdbMiError(f"gdb did not start: {opened.initial_output.strip()[-500:]}")
            session.banner = await session._until(session._framer.take_until_prompt, timeout)
        except BaseException:
            await session.close()
            raise
        return session

    async def command(self, command: str, timeout: float = 30.0) -> list[MiRecord]:
        """Run one MI (or CLI) command; return its response, result record included.

        The response holds every record since the previous call, through the result
        record of this command, without prompts or the echo of the command itself.
        ``^running`` returns as soon as gdb prompts again; use :meth:`wait_for_stopped`
        for the ``*stopped`` that follows. An ``^error`` result is returned, not raised.
        Raises :class:`GdbMiError` if gdb exits without answering or ``timeout``
        (seconds, checked between waits) passes.
        """
        if "\n" in command or "\r" in command or not command.strip():
            raise GdbMiError("an MI command is one non-empty line")
        if command.strip()[0].isdigit():
            # Tokens are this session's own; a leading digit would merge with it, and a
            # bare token is no command at all (gdb answers it with no result record).
            raise GdbMiError("an MI command must not start with a token (digits); pass it bare")
        async with self._lock:
            self._check_alive()
            token = next(self._tokens)
            line = f"{token}{command.strip()}"
            self._framer.expect_echo(line)
            deadline = self._clock() + timeout
            await self._send(line, submit=True)
            return await self._until(lambda: self._framer.take_response(token), None, deadline)

    async def wait_for_stopped(self, timeout: float = 30.0) -> list[MiRecord]:
        """Return the records through the next ``*stopped`` record (it is the last one).

        A ``*stopped`` already received is returned at once. Otherwise this waits until
        gdb reports one, gdb exits (:class:`GdbMiError`), or ``timeout`` passes
        (:class:`GdbMiError`; the target keeps running — interrupt it with
        ``-exec-interrupt`` if needed).
        """
        async with self._lock:
            records = await self._until(self._framer.take_until_stopped, timeout)
        return records

    def take_events(self) -> list[MiRecord]:
        """Return the out-of-band records read so far and not yet returned.

        Only between commands: a command in flight owns the records it is waiting for.
        """
        if self._lock.locked():
            raise GdbMiError("take_events() while a command or wait is in flight")
        self._pump()
        return self._framer.take_all()

    async def exit(self, timeout: float = 10.0) -> list[MiRecord]:
        """Ask gdb to quit (``-gdb-exit``, which also kills the inferior), then close."""
        try:
            if self.alive:
                return await self.command("-gdb-exit", timeout)
            return []
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the PTY session, ending gdb and the program under it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        await self._pty.close(self._owner, self._session_id)

    # -- plumbing ---------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self._closed:
            raise GdbMiError(f"gdb session {self._session_id} is closed")
        if self._exited:
            raise GdbMiError(f"gdb in session {self._session_id} has exited")

    def _pump(self) -> None:
        """Frame every complete line that arrived since the previous read."""
        tail = self._pty.tail(self._owner, self._session_id, _TAIL_LINES)
        if tail.text:
            self._framer.feed(tail.text[:-1].split("\n"))
        if tail.truncated:
            raise GdbMiError(
                "gdb printed more than the terminal scrollback holds between two reads; "
                "some MI records were lost (raise terminal-bash.scrollback_lines)"
            )

    async def _send(self, data: str, submit: bool) -> None:
        sent = await self._pty.send(self._owner, self._session_id, {"data": data, "submit": submit})
        if sent.status.kind == "exited":
            self._exited = True

    async def _until(
        self,
        take: Callable[[], list[MiRecord] | None],
        timeout: float | None,
        deadline: float | None = None,
    ) -> list[MiRecord]:
        """Read and frame until ``take`` yields records, gdb exits, or the deadline passes."""
        if deadline is None:
            assert timeout is not None
            deadline = self._clock() + timeout
        while True:
            self._pump()
            taken = take()
            if taken is not None:
                if any(r.kind is RecordKind.RESULT and r.record_class == "exit" for r in taken):
                    self._exited = True
                return taken
            if self._exited:
                raise GdbMiError(f"gdb in session {self._session_id} exited before answering")
            if self._clock() >= deadline:
                raise GdbMiError(
                    f"gdb did not answer within the timeout (session {self._session_id})"
                )
            await self._send("", submit=False)
