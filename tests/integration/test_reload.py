"""Sessions survive a backend or tool plugin reload; they die with their owner."""

from __future__ import annotations

import time

import pytest

from dsh_terminal_core.kernel.errors import DshError
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import TERMINAL_TOOLS, full_access


async def test_backend_and_tool_reload_keep_sessions_alive() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "export KEPT=yes"})

        await h.reload_plugin("terminal-bash", {"timeout_ms": 1000}, reimport=True)
        await h.reload_plugin("tool-terminal", reimport=True)

        backends = sorted(h.ctx.terminals.list_backends())
        assert "shell" in backends  # zsh and fish beside it where installed
        assert sorted(t for t in h.ctx.tools.names() if t.startswith("terminal_")) == sorted(
            TERMINAL_TOOLS
        )
        assert h.system_prompt().count("## Persistent terminals") == 1
        # The old session, created before both reloads, is untouched and still answers.
        kept = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": 'echo "$KEPT"'})
        assert (kept.value["viewport"], kept.value["waitReason"]) == ("yes\n", "stdin_read")
        # A new session gets the reloaded backend's config.
        new = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        started = time.monotonic()
        slow = await h.call_tool(agent, "terminal_send", {"sessionId": new, "text": "sleep 5"})
        assert slow.value["waitReason"] == "timeout" and time.monotonic() - started < 3
        await agent.dispose()
        assert h.ctx.terminals.list(agent) == []


async def test_reload_rejects_bad_config_and_providers() -> None:
    async with Harness(config=full_access()) as h:
        backends = sorted(h.ctx.terminals.list_backends())
        with pytest.raises(DshError) as bad:
            await h.reload_plugin("terminal-bash", {"timeout_ms": -1})
        assert bad.value.code == "INVALID_CONFIG"
        assert sorted(h.ctx.terminals.list_backends()) == backends  # nothing was unloaded
        with pytest.raises(DshError) as provider:
            await h.reload_plugin("pty-session")
        assert provider.value.code == "RELOAD_UNSUPPORTED"
        with pytest.raises(DshError) as missing:
            await h.reload_plugin("no-such-plugin")
        assert missing.value.code == "INVALID_ARGUMENT"
