"""The MCP server's up-front warning reads the sandbox's declared health, not guessed attributes."""

from __future__ import annotations

from pathlib import Path

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.mcp.server import sandbox_warning
from dsh_terminal_core.sandbox import (
    bwrap_plugin as sandbox_bwrap,
)
from dsh_terminal_core.sandbox import (
    policy_plugin as sandbox_policy,
)
from dsh_terminal_core.sandbox.bwrap import BwrapSandbox, SandboxHealth


async def test_an_unusable_sandbox_is_named_with_its_remedy(tmp_path: Path) -> None:
    config = {
        "sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)},
        "sandbox-bwrap": {"bwrap_path": str(tmp_path / "no-bwrap-here")},
    }
    async with Harness(plugins=[sandbox_policy, sandbox_bwrap], config=config) as h:
        assert isinstance(h.ctx.sandbox, BwrapSandbox)
        assert isinstance(h.ctx.sandbox, SandboxHealth)
        agent = h.create_agent("a")
        warning = sandbox_warning(h, agent)
        assert warning is not None
        assert h.ctx.sandbox.remedy in warning
        assert "workspace-write" in warning
        h.ctx.sandbox_policy.set_mode(agent, "danger-full-access")
        assert sandbox_warning(h, agent) is None


async def test_a_sandbox_without_the_health_calls_is_not_second_guessed(tmp_path: Path) -> None:
    config = {"sandbox-policy": {"mode": "read-only", "workspace_root": str(tmp_path)}}
    async with Harness(plugins=[sandbox_policy, sandbox_bwrap], config=config) as h:
        with h.ctx.override("sandbox", object()):
            assert sandbox_warning(h, h.create_agent("a")) is None
