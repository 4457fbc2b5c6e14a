"""The repository's Kubernetes manifests, run by ``podman kube play`` (no cluster here).

``deploy/worlds/harness-rbac.yaml`` brings up the workload pod, whose daemon a harness
reaches through the exec relay and drives a shell with every fact; ``deploy/kubernetes.yaml``
brings up the MCP server, whose liveness probe passes and whose MCP endpoint answers the
SDK's client at the pod's address. Each copy differs from the repository's file only in
names (the pod, its volume, the Secret) and the image tag, so parallel runs never meet.
SPEC §29 item 1.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest, WaitReason

from .podman import ROOT, Images, podman, podman_ok, unique, wait_for_daemon
from .clients import TOKEN, mcp_session, shipped_config, value_of

pytestmark = pytest.mark.podman


def _substituted(path: Path, out: Path, *pairs: tuple[str, str, int]) -> Path:
    text = path.read_text()
    for old, new, count in pairs:
        assert text.count(old) == count, old
        text = text.replace(old, new)
    out.write_text(text)
    return out


def _pod_yaml(tmp_path: Path, pod: str, image: str) -> Path:
    """deploy/worlds/harness-rbac.yaml with the pod's name, image and volume ours.

    The volume too: podman 4.3 makes an ``emptyDir`` a named volume shared by every pod
    that names it, where Kubernetes gives each pod its own.
    """
    return _substituted(
        ROOT / "deploy" / "worlds" / "harness-rbac.yaml",
        tmp_path / "pod.yaml",
        ("name: agent-pod-0\n", f"name: {pod}\n", 1),
        ("image: my-workload-with-dsh:latest\n", f"image: {image}\n", 1),
        ("name: run-dsh\n", f"name: {pod}-run\n", 2),
    )


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


async def test_kube_play_brings_up_the_server_whose_probe_passes_and_mcp_answers(
    images: Images, tmp_path: Path
) -> None:
    deployment, secret = unique("mcp"), unique("tokens")
    manifest = _substituted(
        ROOT / "deploy" / "kubernetes.yaml",
        tmp_path / "server.yaml",
        ("kind: Deployment\nmetadata:\n  name: dsh-terminal\n",
         f"kind: Deployment\nmetadata:\n  name: {deployment}\n", 1),
        ("image: dsh-terminal:latest", f"image: {images.server}", 1),
        ("name: dsh-terminal-tokens\n", f"name: {secret}\n", 1),
    )  # fmt: skip
    # The Secret as podman reads a secretKeyRef: a JSON object of base64 values.
    tokens = json.dumps({TOKEN: "agent-a"}).encode()
    data = tmp_path / "secret.json"
    data.write_text(json.dumps({"tokens.json": base64.b64encode(tokens).decode()}))
    podman("secret", "create", secret, str(data))
    try:
        podman("kube", "play", str(manifest), timeout=300)
        name = f"{deployment}-pod-0-dsh-terminal"
        deadline = time.monotonic() + 90
        # The liveness probe, as podman runs it inside the container: it must pass.
        while not podman_ok("healthcheck", "run", name, timeout=60):
            assert time.monotonic() < deadline, "the liveness probe never passed"
            await asyncio.sleep(0.5)
        address = podman(
            "inspect", "--format",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name,
        )  # fmt: skip
        async with mcp_session(f"http://{address}:8080/mcp") as session:
            sid = value_of(await session.call_tool("terminal_open", {}))["sessionId"]
            sent = value_of(
                await session.call_tool("terminal_send", {"sessionId": sid, "text": "id -u"})
            )
            assert sent["waitReason"] == "stdin_read" and sent["viewport"].strip() == "10001"
    finally:
        podman("kube", "down", str(manifest), check=False, timeout=300)
        podman("secret", "rm", secret, check=False)
    assert deployment not in podman("pod", "ps", "--format", "{{.Name}}")
