"""Background commands of the ``claude`` profile: each on a session of its own, as a job.

``Bash`` with ``run_in_background`` starts a :class:`BackgroundRun` as a job of the jobs
service; ``TaskOutput`` reads the job and the :class:`BackgroundTask` record beside it.
"""

from __future__ import annotations

import asyncio
import contextlib

import attrs

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.jobs import JobHandle
from dsh_terminal_core.registry import (
    SendOperation,
    SendRequest,
    SendResult,
    TerminalSessionService,
    WaitReason,
)

from .profile_send import exit_code as exit_code_of

__all__ = ["BackgroundRun", "BackgroundTask", "finished_within"]

# How often a background task blocked reading the terminal is looked at again.
_BLOCKED_POLL_S = 0.5


@attrs.define
class BackgroundTask:
    """What ``TaskOutput`` reports of a background command beyond its job."""

    command: str
    description: str
    session_id: str
    exit_code: int | None = None


class BackgroundRun:
    """One background command on a session of its own, run until it exits or is stopped.

    A settle that proves nothing (silence, the send's own bound) is followed by another
    wait, so the task stays ``running`` until the prompt is back; the session is closed
    when it ends.
    """

    def __init__(
        self,
        service: TerminalSessionService,
        owner: Agent,
        session_id: str,
        task: BackgroundTask,
        budget: int,
    ) -> None:
        self._service = service
        self._owner = owner
        self._session_id = session_id
        self._task = task
        self._budget = budget
        self._op: SendOperation | None = None
        self._stopping = False
        self._echo: str | None = task.command + "\n"

    def start(self) -> None:
        """Type the command now, before its job id is handed out."""
        self._op = self._service.start_send(
            self._owner,
            self._session_id,
            SendRequest(text=self._task.command, max_bytes=self._budget),
        )

    def collect(self) -> str:
        """Output new since the previous collect, without the echo of the command line."""
        text = self._op.read_output() if self._op is not None else ""
        if self._echo is not None and text:
            text = text.removeprefix(self._echo)
            self._echo = None
        return text

    async def run(self, handle: JobHandle) -> str:
        try:
            while True:
                assert self._op is not None
                result: SendResult = await self._op.done
                rest = self.collect()
                exit_code = exit_code_of(result)
                if exit_code is not None:
                    # What follows the last newline is the shell's prompt, not output.
                    rest = rest[: rest.rfind("\n") + 1]
                handle.write(rest)
                if exit_code is not None or result.wait_reason == WaitReason.SESSION_EXIT:
                    self._task.exit_code = exit_code
                    return f"exit code {exit_code}"
                if self._stopping:
                    return "stopped"
                if result.wait_reason == WaitReason.STDIN_READ:
                    await asyncio.sleep(_BLOCKED_POLL_S)  # blocked reading: look again later
                self._op = self._service.start_send(
                    self._owner,
                    self._session_id,
                    SendRequest(text="", submit=False, max_bytes=self._budget),
                )
        finally:
            with contextlib.suppress(TerminalError):
                await asyncio.shield(
                    self._service.kill(self._owner, self._session_id, "background task ended")
                )

    async def stop(self) -> None:
        """Ctrl-C the command; the run ends when its prompt is back (or at once if blocked)."""
        self._stopping = True
        op = self._op
        if op is not None and not op.done.done():
            await op.cancel()
        else:
            with contextlib.suppress(TerminalError):
                await self._service.signal(self._owner, self._session_id, "SIGINT")


async def finished_within(finished: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``finished``; whether it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(finished.wait(), seconds)
    return finished.is_set()
