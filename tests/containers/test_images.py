"""The repository's images, built and run with a real container runtime.

The server image (``deploy/Dockerfile``) answers the MCP SDK's client through a
published port; the workload image (``deploy/worlds/Dockerfile.workload``) runs the
world daemon, which a harness reaches through ``podman exec -i ... world --stdio
--socket`` — the shipped ``harness-config.json`` with only its ``kubectl`` prefix
swapped — and whose sessions a restarted harness gets back. The manifests are
tests/containers/test_manifests.py. SPEC §29 item 1.
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

import httpx2
import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest, WaitReason

from .clients import TOKEN, mcp_session, shipped_config, value_of
from .podman import Images, container, podman, wait_for_daemon

pytestmark = pytest.mark.podman

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
            opened = value_of(await session.call_tool("terminal_open", {}))
            sid = opened["sessionId"]
            sent = value_of(
                await session.call_tool(
                    "terminal_send", {"sessionId": sid, "text": "echo $((6*7)) $(id -u); false"}
                )
            )
            assert sent["waitReason"] == "stdin_read" and sent["exitCode"] == 1
            assert "42 10001" in sent["viewport"]
            value_of(await session.call_tool("terminal_close", {"sessionId": sid}))
        # SIGTERM (podman stop) closes every session and the server exits 0.
        podman("stop", "-t", "20", name, timeout=60)
        assert podman("inspect", "--format", "{{.State.ExitCode}}", name) == "0"


async def test_the_shipped_world_config_opens_in_the_workload_image_and_restarts_cleanly(
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
                agent, opened.session_id, SendRequest(text="cd /tmp; echo in-$(hostname); (exit 3)")
            ).done
            assert done.wait_reason is WaitReason.STDIN_READ and done.exit_code == 3
            hostname = podman("inspect", "--format", "{{.Config.Hostname}}", name)
            assert f"in-{hostname}" in done.viewport
            # A confined mode chosen for an owner cannot be kept there: refused, naming it.
            other = h.create_agent("agent-2")
            h.ctx.sandbox_policy.set_mode(other, "workspace-write")
            with pytest.raises(TerminalError) as refused:
                await h.ctx.terminals.spawn(other, SpawnRequest(type="shell"))
            assert refused.value.code == "SANDBOX_UNAVAILABLE"
            assert "world 'pod-0'" in refused.value.message
            await other.dispose()
        # A clean shutdown with persist: true (the shipped config) hands the session over.
        async with Harness(config=config) as h:
            agent = h.create_agent("agent-1")
            await agent.arrived()
            [row] = h.ctx.terminals.list(agent)
            assert row.session_id == opened.session_id and row.world == "pod-0"
            done = await h.ctx.terminals.start_send(
                agent, row.session_id, SendRequest(text="pwd")
            ).done
            assert done.viewport.strip() == "/tmp"
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
