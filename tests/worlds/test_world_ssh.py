"""A world on another "host" reached over the real sshd of the ssh tests (SPEC §21 (c)).

The world's command is the OpenSSH client: ``ssh -T ... root@127.0.0.1 dsh-terminal
world --stdio``. sshd, not the harness, is the world agent's parent, so the harness has
no hold on its processes; the shells are proved gone from the outside, by their owner
marker, after the agent is disposed.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_terminal_bash.census import shells_marked
from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest, WaitReason

from ..ssh.sshd import Sshd, available, keygen, running_sshd


@pytest.fixture(scope="module")
def sshd() -> Iterator[Sshd]:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    with (
        tempfile.TemporaryDirectory(prefix="dsh-world-sshd-") as directory,
        running_sshd(Path(directory)) as server,
    ):
        yield server


def _ssh_world(server: Sshd, known_hosts: Path) -> list[str]:
    return [
        "ssh", "-T",
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=accept-new",
        "-o", f"UserKnownHostsFile={known_hosts}",
        "-i", str(server.client_key),
        "-p", str(server.port),
        f"root@{server.host}",
        sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio",
        "--sandbox", "danger-full-access",
    ]  # fmt: skip


async def test_a_world_over_ssh_settles_sends_exactly(sshd: Sshd, tmp_path: Path) -> None:
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"remote": {"command": _ssh_world(sshd, tmp_path / "kh")}}},
    }
    agent_id = f"ssh-world-{uuid.uuid4().hex[:8]}"
    async with Harness(config=config) as h:
        agent = h.create_agent(agent_id)
        try:
            opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="remote"))
            sid = opened.session_id
            sent = await h.ctx.terminals.start_send(
                agent, sid, SendRequest(text="export W=over-ssh; (exit 7)")
            ).done
            assert sent.wait_reason is WaitReason.STDIN_READ and sent.exit_code == 7
            echoed = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo $W")).done
            assert echoed.viewport.strip() == "over-ssh" and echoed.exit_code == 0
            # A REPL's line settles on the exact stdin wait, decided over there.
            await h.ctx.terminals.start_send(agent, sid, SendRequest(text="python3 -q")).done
            repl = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="6*7")).done
            assert repl.wait_reason is WaitReason.STDIN_READ and "42" in repl.viewport
            await h.ctx.terminals.start_send(agent, sid, SendRequest(text="exit()")).done
            page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=1, count=500))
            assert "over-ssh" in page.text
        finally:
            await agent.dispose()
    deadline = time.monotonic() + 10
    while shells_marked({"DSH_SESSION_ID": agent_id}) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not shells_marked({"DSH_SESSION_ID": agent_id})


async def test_a_host_that_refuses_the_key_is_unavailable(sshd: Sshd, tmp_path: Path) -> None:
    wrong_key = keygen(tmp_path / "wrong")
    command = _ssh_world(sshd, tmp_path / "kh")
    command[command.index(str(sshd.client_key))] = str(wrong_key)
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"remote": {"command": command}}},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("refused")
        with pytest.raises(TerminalError) as refused:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="remote"))
        assert refused.value.code == "WORLD_UNAVAILABLE"
        assert "Permission denied" in refused.value.message
        await agent.dispose()


async def test_the_ssh_consumer_runs_unchanged_from_a_world(sshd: Sshd, tmp_path: Path) -> None:
    # The consumer's ssh client runs in the default world (a namespace world here).
    from .world_fixture import bwrap_works, world_command

    if not bwrap_works():
        pytest.skip("needs working bubblewrap")
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "ssh": {"known_hosts_file": str(tmp_path / "known_hosts")},
        "worlds": {"worlds": {"ns": {"command": world_command()}}, "default": "ns"},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("ssh-from-world")
        opened = await h.call_tool(
            agent,
            "ssh_open",
            {
                "host": sshd.host,
                "port": sshd.port,
                "user": "root",
                "identityFile": str(sshd.client_key),
            },
        )
        assert not opened.is_error, opened.text
        ran = await h.call_tool(
            agent, "ssh_run", {"sessionId": opened.value["sessionId"], "command": "echo hi; false"}
        )
        assert ran.value["waitReason"] == "stdin_read" and ran.value["exitCode"] == 1
        assert ran.value["output"].strip() == "hi"
        worlds = {s.world for s in h.ctx.terminals.list(agent)}
        assert worlds == {"ns"}
        await agent.dispose()
