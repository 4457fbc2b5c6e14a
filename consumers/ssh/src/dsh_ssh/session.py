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

import attrs

from dsh_pty_session import PtySessionService
from dsh_terminal_core.agents import Agent
from dsh_terminal_core.errors import ErrorCode, InvalidArgument

from .config import SshConfig
from .errors import SshError
from .options import Destination
from .remote import MAX_LINE_BYTES, RemoteProtocol, quote

__all__ = ["RunResult", "SshSession"]

_INTERRUPT = "\x03"


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

    def to_wire(self) -> dict[str, object]:
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
    ) -> None:
        self.session_id = session_id
        self.owner = owner
        self.destination = destination
        self.pty_id = pty_id
        self.banner = banner
        self.name = name
        self._pty = pty
        self._protocol = protocol
        self._config = config
        self._seq = 0
        self._pending: int | None = None
        self._lock = asyncio.Lock()
        self._running = False
        self._write_task: asyncio.Task[object] | None = None
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
                await self._write(self._protocol.command_line(seq, command) + "\n")
            return await self._until_prompt(seq, timeout_ms)

    async def _until_prompt(self, seq: int, timeout_ms: int) -> RunResult:
        prompt = self._protocol.prompt_pattern(seq)
        self._running = True
        try:
            waited = await self._pty.wait(self.owner, self.pty_id, prompt, timeout_ms)
        finally:
            self._running = False
        output = self._protocol.output(waited.text)
        if waited.reason == "match":
            assert waited.matched is not None
            found = prompt.search(waited.matched)
            assert found is not None
            self._pending = None
            return RunResult(
                output=output,
                exit_code=int(found["rc"]),
                wait_reason="stdin_read",
                truncated=waited.truncated,
            )
        if waited.reason == "exit":
            tail = (output + waited.open_line).strip()
            self._lost = tail.splitlines()[-1] if tail else "the ssh client exited"
            return RunResult(
                output=output + waited.open_line,
                exit_code=None,
                wait_reason="session_exit",
                truncated=waited.truncated,
            )
        return RunResult(
            output=output, exit_code=None, wait_reason="timeout", truncated=waited.truncated
        )

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
