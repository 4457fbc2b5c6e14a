"""The repository's images and manifests, built and run with a real container runtime.

The server image (``deploy/Dockerfile``) answers the MCP SDK's client through a
published port; the workload image (``deploy/worlds/Dockerfile.workload``) runs the
world daemon, which a harness reaches through ``podman exec -i ... world --stdio
--socket`` — the shipped ``harness-config.json`` with only its ``kubectl`` prefix
swapped — and whose sessions a restarted harness gets back; ``podman kube play`` of
``deploy/worlds/harness-rbac.yaml`` brings up the workload pod, and a harness drives a
shell in it with every fact. SPEC §29 items 1 and 4.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest, WaitReason

from .podman import (
    PODMAN,
    ROOT,
    Images,
    container,
    exec_command,
    podman,
    unique,
    wait_for_daemon,
)

pytestmark = pytest.mark.podman

TOKEN = "tok-container-0123456789abcdef"


def shipped_config(name: str) -> dict[str, Any]:
    """deploy/worlds/harness-config.json with only the ``kubectl ... --`` prefix swapped."""
    config = json.loads((ROOT / "deploy" / "worlds" / "harness-config.json").read_text())
    [entry] = config["worlds"]["worlds"].values()
    command = entry["command"]
    assert command[0] == "kubectl"
    entry["command"] = [PODMAN, "exec", "-i", name, *command[command.index("--") + 1 :]]
    assert entry["command"][3:] == exec_command(name)[3:]
    return dict(config)


@asynccontextmanager
async def mcp_session(url: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _value(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def _healthy(url: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx2.AsyncClient() as client:
        while True:
            try:
                if (await client.get(url, timeout=5)).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{url} never answered"
            await asyncio.sleep(0.2)


async def test_the_server_image_answers_the_sdk_client_through_a_published_port(
    images: Images,
) -> None:
    tokens = json.dumps({TOKEN: "agent-a"})
    with container(
        images.server, "-p", "127.0.0.1::8080", "-e", f"DSH_MCP_TOKENS={tokens}"
    ) as name:
        address = podman("port", name, "8080").splitlines()[0]
        await _healthy(f"http://{address}/healthz")
        async with mcp_session(f"http://{address}/mcp") as session:
            opened = _value(await session.call_tool("terminal_open", {}))
            sid = opened["sessionId"]
            sent = _value(
                await session.call_tool(
                    "terminal_send", {"sessionId": sid, "text": "echo $((6*7)) $(id -u); false"}
                )
            )
            assert sent["waitReason"] == "stdin_read" and sent["exitCode"] == 1
            assert "42 10001" in sent["viewport"]
            _value(await session.call_tool("terminal_close", {"sessionId": sid}))
        # SIGTERM (podman stop) closes every session and the server exits 0.
        podman("stop", "-t", "20", name, timeout=60)
        assert podman("inspect", "--format", "{{.State.ExitCode}}", name) == "0"


async def test_the_shipped_world_config_opens_in_the_workload_image_and_says_its_name(
    images: Images,
) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        config = shipped_config(name)
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            # The world's own default (the container is the sandbox), not this host's.
            opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
            assert opened.world == "pod-0"
            done = await h.ctx.terminals.start_send(
                agent, opened.session_id, SendRequest(text="echo in-$(hostname); (exit 3)")
            ).done
            assert done.wait_reason is WaitReason.STDIN_READ and done.exit_code == 3
            assert f"in-{podman('inspect', '--format', '{{.Config.Hostname}}', name)}" in (
                done.viewport
            )
            # A confined mode chosen for an owner cannot be kept there: refused, naming it.
            other = h.create_agent("agent-2")
            h.ctx.sandbox_policy.set_mode(other, "workspace-write")
            with pytest.raises(TerminalError) as refused:
                await h.ctx.terminals.spawn(other, SpawnRequest(type="shell"))
            assert refused.value.code == "SANDBOX_UNAVAILABLE"
            assert "world 'pod-0'" in refused.value.message
            await other.dispose()
            await agent.dispose()


_HARNESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from dsh_terminal_core import Harness
    from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest

    async def main():
        h = Harness(config=json.loads(sys.argv[1]))
        await h.start()
        agent = h.create_agent("agent-1")
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))).session_id
        await h.ctx.terminals.start_send(agent, sid, SendRequest(text="export KEPT=yes")).done
        h.ctx.terminals.start_send(
            agent, sid,
            SendRequest(text="for i in 1 2 3; do sleep 0.3; echo tick-$i; done", timeout_ms=60000),
        )
        while "for i in" not in h.ctx.terminals.read(agent, sid, ReadRequest()).text:
            await asyncio.sleep(0.01)
        print(sid, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


async def test_a_harness_killed_mid_send_gets_its_sessions_back_through_the_exec_relay(
    images: Images,
) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        config = shipped_config(name)
        [entry] = config["worlds"]["worlds"].values()
        entry["key"] = f"key-{uuid.uuid4().hex}"
        first = subprocess.Popen(
            [sys.executable, "-c", _HARNESS, json.dumps(config)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert first.stdout is not None
            sid = first.stdout.readline().strip()
            assert sid, "the first harness never opened its session"
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the harness and its podman exec
            first.wait()
            if first.stdout is not None:
                first.stdout.close()
        started = time.monotonic()
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            await agent.arrived()
            [row] = h.ctx.terminals.list(agent)
            assert row.session_id == sid and row.world == "pod-0"
            # The loop the dead harness started settles here, or settled meanwhile.
            while "tick-3" not in h.ctx.terminals.read(agent, sid, ReadRequest()).text:
                await asyncio.sleep(0.05)
            done = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo $KEPT")).done
            assert done.wait_reason is WaitReason.STDIN_READ and done.viewport.strip() == "yes"
            assert time.monotonic() - started < 60
            await agent.dispose()
        # Disposed: the daemon holds nothing for the key any more.
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            await agent.arrived()
            assert h.ctx.terminals.list(agent) == []
            await agent.dispose()


async def test_a_clean_restart_with_persist_hands_the_sessions_to_the_next_harness(
    images: Images,
) -> None:
    with container(images.workload) as name:
        wait_for_daemon(name)
        config = shipped_config(name)
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))).session_id
            await h.ctx.terminals.start_send(agent, sid, SendRequest(text="cd /tmp")).done
        # persist: true in the shipped config — the upgrade case.
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            await agent.arrived()
            [row] = h.ctx.terminals.list(agent)
            assert row.session_id == sid
            done = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="pwd")).done
            assert done.viewport.strip() == "/tmp"
            await agent.dispose()


def _pod_yaml(tmp_path: Path, pod: str, image: str) -> Path:
    """deploy/worlds/harness-rbac.yaml with the pod's name, image and volume ours.

    The volume too: podman 4.3 makes an ``emptyDir`` a named volume shared by every pod
    that names it, where Kubernetes gives each pod its own.
    """
    text = (ROOT / "deploy" / "worlds" / "harness-rbac.yaml").read_text()
    for old, new, count in (
        ("name: agent-pod-0\n", f"name: {pod}\n", 1),
        ("image: my-workload-with-dsh:latest\n", f"image: {image}\n", 1),
        ("name: run-dsh\n", f"name: {pod}-run\n", 2),
    ):
        assert text.count(old) == count, old
        text = text.replace(old, new)
    path = tmp_path / "pod.yaml"
    path.write_text(text)
    return path


async def test_kube_play_brings_up_the_workload_pod_and_a_shell_there_has_every_fact(
    images: Images, tmp_path: Path
) -> None:
    pod = unique("pod")
    manifest = _pod_yaml(tmp_path, pod, images.workload)
    podman("kube", "play", str(manifest), timeout=300)
    try:
        name = f"{pod}-workload"
        wait_for_daemon(name)
        config = shipped_config(name)
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            terminals = h.ctx.terminals
            sid = (await terminals.spawn(agent, SpawnRequest(type="shell"))).session_id

            async def send(text: str, **more: Any) -> Any:
                return await terminals.start_send(agent, sid, SendRequest(text=text, **more)).done

            failed = await send("id -u; (exit 7)")
            assert failed.exit_code == 7 and failed.viewport.splitlines()[0] == "10001"
            repl = await send("python3 -q")
            assert repl.wait_reason is WaitReason.STDIN_READ and ">>>" in repl.viewport
            line = await send("print(6 * 7)")
            assert line.wait_reason is WaitReason.STDIN_READ and "42" in line.viewport
            left = await send("exit()")
            assert left.exit_code == 0
            op = terminals.start_send(agent, sid, SendRequest(text="sleep 30", timeout_ms=60000))
            while "sleep 30" not in terminals.read(agent, sid, ReadRequest(offset=1)).text:
                await asyncio.sleep(0.01)
            await op.cancel()
            interrupted = await asyncio.wait_for(op.done, 10)
            assert interrupted.exit_code == 130
            terminals.resize(agent, sid, 30, 100)
            assert (await send("stty size")).viewport.strip() == "30 100"
            screen = (await terminals.spawn(agent, SpawnRequest(type="shell", screen=True)))
            top = await terminals.start_send(
                agent, screen.session_id, SendRequest(text="top")
            ).done
            assert top.wait_reason is WaitReason.STDIN_READ
            shown = terminals.read_screen(agent, screen.session_id).screen.text
            assert "load average" in shown and "PID" in shown
            quit_ = await terminals.start_send(
                agent, screen.session_id, SendRequest(text="", keys=("q",))
            ).done
            assert quit_.exit_code == 0
            await agent.dispose()
    finally:
        podman("kube", "down", str(manifest), check=False, timeout=300)
        podman("volume", "rm", "-f", f"{pod}-run", check=False)
    assert pod not in podman("pod", "ps", "--format", "{{.Name}}")
