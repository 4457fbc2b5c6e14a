"""The bash backend under bubblewrap: same readiness, real confinement, mode fence."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SpawnRequest, WaitReason
from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

from ..helpers import send

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(
        not BwrapSandbox(BwrapConfig()).available(), reason="bubblewrap is not usable here"
    ),
]


def confined(workspace: Path, mode: str = "workspace-write") -> dict[str, object]:
    return {"sandbox-policy": {"mode": mode, "workspace_root": str(workspace)}}


async def test_echo_and_repl_settle_on_stdin_read_under_bwrap(tmp_path: Path) -> None:
    async with Harness(config=confined(tmp_path)) as h:
        agent = h.create_agent("a")
        spawned = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        sid = spawned.session_id
        session = h.ctx.terminals.get_session(agent, sid)
        # Under bwrap the PTY child is bwrap; the shell's group was learned from its prompt.
        assert session.shell_pid is not None and session.shell_pid != spawned.pid
        started = time.monotonic()
        echoed = await send(h, agent, sid, "echo inside")
        assert time.monotonic() - started < 1.5
        assert (echoed.wait_reason, echoed.exit_code, echoed.viewport) == (
            WaitReason.STDIN_READ,
            0,
            "inside\n",
        )
        await send(h, agent, sid, "python3 -q -i")
        started = time.monotonic()
        repl = await send(h, agent, sid, "1+1")
        assert time.monotonic() - started < 1.5
        assert repl.wait_reason is WaitReason.STDIN_READ and repl.viewport.startswith("2\n")
        await send(h, agent, sid, "exit()")


async def test_workspace_write_is_enforced_from_inside_the_shell(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    # Outside both the workspace and /tmp (which workspace-write also leaves writable).
    outside = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="dsh-outside-"))
    try:
        await _check_workspace_write(workspace, outside)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


async def _check_workspace_write(workspace: Path, outside: Path) -> None:
    async with Harness(config=confined(workspace)) as h:
        agent = h.create_agent("a")
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))).session_id
        inside = await send(h, agent, sid, "echo ok > inside.txt")
        assert inside.exit_code == 0
        assert (workspace / "inside.txt").read_text() == "ok\n"
        denied = await send(h, agent, sid, f"echo no > {outside}/x.txt")
        assert denied.exit_code != 0 and not (outside / "x.txt").exists()
        assert "Read-only file system" in denied.viewport
        readable = await send(h, agent, sid, "head -c 0 /etc/hostname && echo readable")
        assert readable.viewport == "readable\n"


async def test_read_only_cannot_write_the_workspace(tmp_path: Path) -> None:
    async with Harness(config=confined(tmp_path, "read-only")) as h:
        agent = h.create_agent("a")
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))).session_id
        denied = await send(h, agent, sid, "touch inside.txt")
        assert denied.exit_code != 0 and not (tmp_path / "inside.txt").exists()


async def test_mode_fence_holds_while_a_session_is_open(tmp_path: Path) -> None:
    async with Harness(config=confined(tmp_path)) as h:
        agent = h.create_agent("a")
        policy = h.ctx.sandbox_policy
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))).session_id
        with pytest.raises(TerminalError) as info:
            policy.set_mode(agent, "danger-full-access")
        assert info.value.code == "SANDBOX_MODE_LOCKED"
        assert "close them first" in str(info.value)
        policy.set_mode(agent, "workspace-write")  # the same mode is always allowed
        await h.ctx.terminals.kill(agent, sid, "test")
        assert policy.set_mode(agent, "danger-full-access").mode == "danger-full-access"


async def test_confined_mode_without_a_sandbox_provider_fails_before_spawn(tmp_path: Path) -> None:
    from dsh_terminal_bash import plugin as bash_plugin
    from dsh_terminal_core.provider import plugin as subprocess_local
    from dsh_terminal_core.registry import plugin as terminals
    from dsh_terminal_core.sandbox import policy_plugin as sandbox_policy

    before = set(os.listdir("/proc"))
    async with Harness(
        plugins=[subprocess_local, terminals, sandbox_policy, bash_plugin],
        config=confined(tmp_path),
    ) as h:
        agent = h.create_agent("a")
        with pytest.raises(TerminalError) as info:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        assert info.value.code == "SANDBOX_UNAVAILABLE"
        assert "danger-full-access" in str(info.value) and "bubblewrap" in str(info.value)
    assert h.ctx.terminals.list(agent) == [] and before is not None


async def test_unusable_bwrap_names_both_remedies(tmp_path: Path) -> None:
    config = {**confined(tmp_path), "sandbox-bwrap": {"bwrap_path": "/nonexistent/bwrap"}}
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        with pytest.raises(TerminalError) as info:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        message = str(info.value)
        assert "install bubblewrap" in message and "danger-full-access" in message
