"""The ``gdb_mi`` tool: one gdb per agent, started on the agent's first call.

A model debugging a program sends MI commands one at a time; the gdb process and its
breakpoints must survive between calls, so sessions are kept per calling agent and
closed with it. Nothing starts before the first call.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Annotated, NotRequired, TypedDict

from dsh_pty_session import PtySessionService
from dsh_terminal_core import MAX_RESULT_BYTES, cap_text
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.cancel import Cancellation
from dsh_terminal_core.kernel.tooldecl import Range, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec

from .records import MiRecord, MiRecordValue
from .session import GdbMiSession

__all__ = ["GdbMiSessions", "gdb_mi_tool"]

DEFAULT_TIMEOUT_MS = 30000


class GdbMiSessions:
    """The live :class:`GdbMiSession` of each agent; the agent's disposal closes it."""

    def __init__(self, pty: Callable[[], PtySessionService], gdb: str = "gdb") -> None:
        self._pty = pty
        self._gdb = gdb
        self._sessions: dict[Agent, GdbMiSession] = {}
        self._starting: weakref.WeakKeyDictionary[Agent, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._hooked: weakref.WeakSet[Agent] = weakref.WeakSet()

    def get(self, agent: Agent) -> GdbMiSession | None:
        session = self._sessions.get(agent)
        return session if session is not None and session.alive else None

    async def for_agent(self, agent: Agent, cancel: Cancellation | None = None) -> GdbMiSession:
        """Return the agent's gdb, starting one if it has none (or its gdb has exited)."""
        lock = self._starting.setdefault(agent, asyncio.Lock())
        async with lock:
            session = self.get(agent)
            if session is not None:
                return session
            await self.forget(agent)
            session = await GdbMiSession.open(self._pty(), agent, gdb=self._gdb, cancel=cancel)
            self._sessions[agent] = session
            if agent not in self._hooked and agent.live:
                self._hooked.add(agent)
                ref = weakref.ref(agent)
                agent.on_dispose(lambda: self._on_disposed(ref))
            return session

    async def forget(self, agent: Agent) -> None:
        """Close and drop the agent's gdb session, if any."""
        session = self._sessions.pop(agent, None)
        if session is not None:
            await session.close()

    async def _on_disposed(self, ref: weakref.ref[Agent]) -> None:
        agent = ref()
        if agent is not None:
            await self.forget(agent)


class GdbMiArgs(TypedDict):
    command: Annotated[str, Text(1, 4096)]
    waitForStop: NotRequired[bool]
    timeoutMs: NotRequired[Annotated[int, Range(1, 600000)]]


class GdbMiValue(TypedDict):
    """The tool's value: the records as parsed, and the lines they came from."""

    sessionId: str
    records: list[MiRecordValue]
    output: str


def gdb_mi_tool(sessions: GdbMiSessions) -> Tool:
    """Build the ``gdb_mi`` tool over ``sessions``."""

    def render(_args: GdbMiArgs, value: GdbMiValue) -> str:
        return cap_text(value["output"] or "(no output)", MAX_RESULT_BYTES, keep="tail")

    @tool(
        "gdb_mi",
        description=(
            "Run one GDB/MI command in this agent's gdb (started on first use, kept between "
            "calls) and return the parsed MI records, e.g. '-file-exec-and-symbols ./prog', "
            "'-break-insert main', '-exec-run', '-exec-next', "
            "'-data-evaluate-expression x', '-gdb-exit'. After a command that resumes the "
            "program (^running) it also waits for the *stopped record unless waitForStop "
            "is false."
        ),
        render=render,
        finalize=lambda text: cap_text(text, MAX_RESULT_BYTES),
    )
    async def gdb_mi(args: GdbMiArgs, exec_: ToolExec) -> GdbMiValue:
        timeout = args.get("timeoutMs", DEFAULT_TIMEOUT_MS) / 1000
        session = await sessions.for_agent(exec_.agent, exec_.cancel)
        records: list[MiRecord] = await session.command(args["command"], timeout)
        result = next((r for r in reversed(records) if r.is_result), None)
        if (
            args.get("waitForStop", True)
            and result is not None
            and result.record_class == "running"
        ):
            records += await session.wait_for_stopped(timeout)
        value: GdbMiValue = {
            "sessionId": session.session_id,
            "records": [r.to_wire() for r in records],
            "output": "\n".join(r.raw for r in records),
        }
        if not session.alive:
            await sessions.forget(exec_.agent)
        return value

    return gdb_mi
