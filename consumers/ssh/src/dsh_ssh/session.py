"""One remote login shell, driven command by command over a ``ctx.pty`` session.

The local side is an ``ssh -tt`` client multiplexed over its owner's master for the
destination (see :mod:`.options`); the remote side is a login shell running the prompt
protocol of :mod:`.remote`. Everything goes through the protocol-free facade: ``send``
writes bytes to the client, ``wait`` returns the lines through the next prompt.

Writes are never cancelled: cancelling a facade send interrupts the *local* foreground
program, which here is the ssh client itself. A write is left to settle on its own and
the next write waits for it; an interrupt is ``^C`` written to the remote terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypedDict

import attrs

from dsh_pty_session import PtySessionService
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import ErrorCode, InvalidArgument

from .config import SshConfig
from .errors import SshError
from .options import Destination
from .remote import MAX_LINE_BYTES, RemoteProtocol, quote

__all__ = ["RunResult", "RunValue", "SshSession"]

_INTERRUPT = "\x03"
# The status a shell reports after SIGINT (128 + 2): what a ^C at an idle prompt prints.
_SIGINT_STATUS = 130


class RunValue(TypedDict):
    """A :class:`RunResult` on the wire: the ``ssh_run`` tool's value."""

    output: str
    exitCode: int | None
    waitReason: str
    truncated: bool


@attrs.frozen(kw_only=True)
class RunResult:
    """What a command printed, its exit status, and why the wait ended.

    ``wait_reason`` is ``stdin_read`` (the remote prompt came back; ``exit_code`` is
    set), ``timeout`` (the command still runs) or ``session_exit`` (the connection or the
    remote shell ended; ``output`` ends with ssh's own message).
    """

    output: str
    exit_code: int | None
    wait_reason: str
    truncated: bool = False

    def to_wire(self) -> RunValue:
        return {
            "output": self.output,
            "exitCode": self.exit_code,
            "waitReason": self.wait_reason,
            "truncated": self.truncated,
        }


class SshSession:
    """A remote shell owned by ``owner``; one command at a time, interrupts at any time."""

    def __init__(
        self,
        *,
        session_id: str,
        owner: Agent,
        destination: Destination,
        pty: PtySessionService,
        pty_id: str,
        protocol: RemoteProtocol,
        config: SshConfig,
        banner: str,
        name: str | None,
        user: str | None = None,
        master_words: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        self.session_id = session_id
        self.owner = owner
        self.destination = destination
        self.pty_id = pty_id
        self.banner = banner
        self.name = name
        self.user = user
        self._pty = pty
        self._master_words = master_words
        self._protocol = protocol
        self._config = config
        self._seq = 0
        self._pending: int | None = None
        self._interrupted: int | None = None
        self._lock = asyncio.Lock()
        self._running = False
        self._write_task: asyncio.Task[object] | None = None
        self._write_lock = asyncio.Lock()
        self._lost: str | None = None
        self.closed = False

    @property
    def lost(self) -> str | None:
        """ssh's last words once the connection or the remote shell ended, else None."""
        return self._lost

    @property
    def busy(self) -> bool:
        """True while a command that timed out is still running remotely."""
        return self._pending is not None

    # -- run ------------------------------------------------------------------------------

    async def run(self, command: str, timeout_ms: int) -> RunResult:
        """Run ``command`` in the remote shell; return at its prompt, at the budget, or at exit.

        ``""`` continues waiting for a command that timed out. Raises ``SSH_BUSY`` when
        another command is still running (or another run is in flight),
        ``SSH_CONNECTION_LOST`` when the session already ended, ``INVALID_ARGUMENT`` for
        a command the remote terminal cannot take as typed input.
        """
        self._check_alive()
        if self._lock.locked():
            raise SshError(
                f"ssh session {self.session_id} is running another command", ErrorCode.SSH_BUSY
            )
        async with self._lock:
            line: str | None = None
            if command == "":
                if self._pending is None:
                    raise InvalidArgument(
                        "command is empty; an empty command only continues waiting for a "
                        "command that timed out, and none is running"
                    )
                seq = self._pending
            else:
                if self._pending is not None:
                    raise SshError(
                        f"the previous command in ssh session {self.session_id} is still "
                        "running after its timeout; call ssh_interrupt to stop it, or "
                        "ssh_run with an empty command to keep waiting for it",
                        ErrorCode.SSH_BUSY,
                    )
                _check_command(command)
                self._seq += 1
                seq = self._seq
                self._pending = seq
                line = self._protocol.command_line(seq, command) + "\n"
                await self._write(line)
            return await self._until_prompt(seq, timeout_ms, line)

    async def _until_prompt(self, seq: int, timeout_ms: int, line: str | None = None) -> RunResult:
        """Wait for the prompt that follows command ``seq``; collect its output.

        A prompt of another command with status 130 comes from a ``^C`` that reached the
        shell between commands. If ``^C`` was written for this command, it arrived
        before the shell ran this command's line — the terminal flushed the line, or the
        shell dropped it unexecuted — so the command ended without running (130).
        Otherwise it was meant for the previous command, which had just ended: the shell
        may have dropped this command's line on the way, so ``line`` is typed again (its
        guard makes a surviving first copy run it only once). Other prompts of other
        commands — a guarded copy that found its number taken — are skipped.
        """
        prompt = self._protocol.any_prompt()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        texts: list[str] = []
        truncated = False
        self._running = True
        try:
            while True:
                remaining = max(0, int((deadline - loop.time()) * 1000))
                waited = await self._pty.wait(self.owner, self.pty_id, prompt, remaining)
                texts.append(waited.text)
                truncated = truncated or waited.truncated
                if waited.reason != "match":
                    break
                assert waited.matched is not None
                found = prompt.search(waited.matched)
                assert found is not None
                mine = int(found["seq"]) == seq
                interrupted_idle = not mine and int(found["rc"]) == _SIGINT_STATUS
                if mine or (interrupted_idle and self._interrupted == seq):
                    self._pending = None
                    return RunResult(
                        output=self._protocol.output("".join(texts), seq),
                        exit_code=int(found["rc"]),
                        wait_reason="stdin_read",
                        truncated=truncated,
                    )
                if interrupted_idle and line is not None:
                    await self._write(line)
        finally:
            self._running = False
        output = self._protocol.output("".join(texts), seq)
        if waited.reason == "exit":
            output += waited.open_line
            words = await self._master_words() if self._master_words is not None else ""
            if words and words not in output:
                output += ("" if not output or output.endswith("\n") else "\n") + words + "\n"
            tail = (words or output).strip()
            self._lost = tail.splitlines()[-1] if tail else "the ssh client exited"
            return RunResult(
                output=output,
                exit_code=None,
                wait_reason="session_exit",
                truncated=truncated,
            )
        return RunResult(output=output, exit_code=None, wait_reason="timeout", truncated=truncated)

    # -- interrupt ------------------------------------------------------------------------

    async def interrupt(self) -> tuple[bool, int | None]:
        """Write ``^C`` to the remote terminal if a command runs; return (delivered, status).

        Nothing is written when no command runs (a ``^C`` at an idle prompt would only
        print another prompt). When no ``ssh_run`` is waiting for the interrupted
        command, this waits up to ``interrupt_wait_ms`` for its prompt and returns its
        exit status; a program that ignores ``^C`` keeps the session busy.
        """
        self._check_alive()
        if self._pending is None:
            return False, None
        self._interrupted = self._pending
        await self._write(_INTERRUPT)
        if self._lock.locked():
            return True, None  # the ssh_run in flight collects the prompt
        async with self._lock:
            seq = self._pending
            if seq is None:
                return True, None
            result = await self._until_prompt(seq, self._config.interrupt_wait_ms)
            return True, result.exit_code

    # -- plumbing -------------------------------------------------------------------------

    def _check_alive(self) -> None:
        if self.closed:
            raise SshError(
                f"ssh session {self.session_id} is closed", ErrorCode.SSH_CONNECTION_LOST
            )
        if self._lost is not None:
            raise SshError(
                f"the connection of ssh session {self.session_id} is gone: {self._lost}",
                ErrorCode.SSH_CONNECTION_LOST,
            )

    async def _write(self, data: str) -> None:
        """Hand ``data`` to the ssh client once the previous write has settled.

        Lines end in a newline, not the Enter key's carriage return: the remote terminal
        gets no modes from a client that relays a pipe, and a newline ends a line in
        every mode a line editor or the kernel's canonical mode may be in.

        The write runs in its own task and is never cancelled (see the module notes);
        the caller's cancellation only stops the caller's wait for an earlier write.
        """
        async with self._write_lock:
            previous = self._write_task
            if previous is not None and not previous.done():
                await asyncio.shield(previous)
            if previous is not None and previous.done() and not previous.cancelled():
                error = previous.exception()
                if error is not None:
                    raise error
            task = asyncio.get_running_loop().create_task(
                self._pty.send(self.owner, self.pty_id, {"data": data, "submit": False})
            )
            task.add_done_callback(_retrieve)
            self._write_task = task

    async def settle(self) -> None:
        """Wait for the last write to settle (the session is closing or closed)."""
        task = self._write_task
        if task is not None and not task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(task)


def _retrieve(task: asyncio.Task[object]) -> None:
    if not task.cancelled():
        task.exception()


def _check_command(command: str) -> None:
    if not isinstance(command, str):
        raise InvalidArgument("command must be a string")
    bad = sorted({c for c in command if (ord(c) < 32 and c not in "\t\n") or ord(c) == 127})
    if bad:
        raise InvalidArgument(
            "command holds control characters the remote terminal would act on "
            f"({', '.join(repr(c) for c in bad)}); use ssh_interrupt for Ctrl-C"
        )
    for line in quote(command).split("\n"):
        size = len(line.encode()) + 32  # the sequence assignment and eval before it
        if size > MAX_LINE_BYTES:
            raise InvalidArgument(
                f"a line of the command takes {size} bytes as typed; the remote terminal "
                f"takes at most {MAX_LINE_BYTES} per line — put long content in a file "
                "(e.g. a here-document of shorter lines)"
            )
