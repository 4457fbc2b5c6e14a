"""Our stack, driven at the service level (``ctx.terminals``) and the tool level."""

from __future__ import annotations

from typing import Any

from _env import Expect

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest

__all__ = ["ServiceDriver", "ToolDriver", "stack_config"]

MIB = 1024 * 1024


def stack_config(**bash: Any) -> dict[str, Any]:
    """Harness config: unconfined shells, room for every benchmark session, bash overrides."""
    return {
        "sandbox-policy": {"mode": "danger-full-access"},
        "terminals": {"max_sessions_per_owner": 512},
        "terminal-bash": dict(bash),
    }


class _StackDriver:
    concurrent = True

    def __init__(self, owner_id: str, **bash: Any) -> None:
        self._owner_id = owner_id
        self._bash = bash
        self.harness: Harness | None = None
        self.agent: Any = None

    async def start(self) -> None:
        self.harness = Harness(config=stack_config(**self._bash))
        await self.harness.start()
        self.agent = self.harness.create_agent(self._owner_id)

    @property
    def h(self) -> Harness:
        assert self.harness is not None, "start() first"
        return self.harness

    def session_object(self, session_id: str) -> Any:
        """The backend session behind ``session_id`` (for scrollback facts)."""
        return self.h.ctx.terminals.get_session(self.agent, session_id)

    async def aclose(self) -> None:
        if self.harness is not None:
            await self.harness.aclose()


class ServiceDriver(_StackDriver):
    """``ctx.terminals.spawn`` / ``start_send`` + ``await op.done`` / ``kill``."""

    name = "service"

    async def open(self) -> str:
        result = await self.h.ctx.terminals.spawn(self.agent, SpawnRequest(type="shell"))
        return str(result.session_id)

    async def send(self, session_id: str, text: str, expect: Expect = "prompt") -> str | None:
        op = self.h.ctx.terminals.start_send(self.agent, session_id, SendRequest(text=text))
        result = await op.done
        return str(result.wait_reason)

    async def close(self, session_id: str) -> None:
        await self.h.ctx.terminals.kill(self.agent, session_id, "benchmark")


class ToolDriver(_StackDriver):
    """``terminal_open`` / ``terminal_send`` / ``terminal_close`` through ``call_tool``."""

    name = "tool"

    async def _call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await self.h.call_tool(self.agent, tool, args)
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.text}")
        value: dict[str, Any] = result.value
        return value

    async def open(self) -> str:
        return str((await self._call("terminal_open", {"type": "shell"}))["sessionId"])

    async def send(self, session_id: str, text: str, expect: Expect = "prompt") -> str | None:
        value = await self._call("terminal_send", {"sessionId": session_id, "text": text})
        return str(value["waitReason"])

    async def close(self, session_id: str) -> None:
        await self._call("terminal_close", {"sessionId": session_id})
