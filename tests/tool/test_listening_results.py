"""Servers say where they listen: ``listening`` on results and snapshots (SPEC §19.3).

Real servers (python's http.server, a unix-socket listener) in real sessions with the
production timing defaults: the listening tier settles a server that came up after
``listen_settle_ms`` of quiet instead of the whole ``idle_silence_ms``.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

from ..helpers import full_access

SERVED = re.compile(r"Serving HTTP on (\S+) port (\d+)")


async def _open(h: Harness, agent: object) -> str:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})  # type: ignore[arg-type]
    return str(opened.value["sessionId"])


async def _serve(h: Harness, agent: object, sid: str, bind: str) -> dict[str, object]:
    sent = await h.call_tool(
        agent,  # type: ignore[arg-type]
        "terminal_send",
        {"sessionId": sid, "text": f"python3 -m http.server 0 --bind {bind}"},
    )
    return dict(sent.value) | {"_text": sent.text}


async def test_a_server_that_came_up_settles_with_where_it_listens() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        value = await _serve(h, agent, sid, "127.0.0.1")
        assert value["waitReason"] == "inferred_idle", value
        served = SERVED.search(str(value["viewport"]))
        assert served is not None
        [listening] = value["listening"]  # type: ignore[misc]
        assert listening["address"] == "127.0.0.1"
        assert listening["port"] == int(served.group(2))
        assert "http.server" in listening["command"]
        # The listening tier said so, not the silence: the status line tells the model.
        assert "a server came up" in str(value["_text"])
        assert f"127.0.0.1:{served.group(2)}" in str(value["_text"])
        # terminal_list carries it too, while it listens.
        listed = await h.call_tool(agent, "terminal_list", {})
        assert listed.value["sessions"][0]["listening"] == [listening]
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        back = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "", "submit": False}
        )
        assert back.value["waitReason"] == "stdin_read"
        listed = await h.call_tool(agent, "terminal_list", {})
        assert "listening" not in listed.value["sessions"][0]
        await agent.dispose()


@pytest.mark.skipif(not socket.has_ipv6, reason="no IPv6 here")
async def test_ipv6_listener() -> None:
    try:
        probe = socket.socket(socket.AF_INET6)
        probe.bind(("::1", 0))
        probe.close()
    except OSError:
        pytest.skip("::1 is not configured here")
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        value = await _serve(h, agent, sid, "::1")
        assert value["waitReason"] == "inferred_idle"
        [listening] = value["listening"]  # type: ignore[misc]
        assert listening["address"] == "::1" and isinstance(listening["port"], int)
        await agent.dispose()


async def test_unix_socket_listener_has_its_path_and_no_port(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    program = (
        "import socket,time; s=socket.socket(socket.AF_UNIX); "
        f"s.bind({str(path)!r}); s.listen(); print('ready', flush=True); time.sleep(60)"
    )
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        sent = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": f'python3 -c "{program}"'}
        )
        assert sent.value["waitReason"] == "inferred_idle"
        assert [(e["address"], e["port"]) for e in sent.value["listening"]] == [(str(path), None)]
        await agent.dispose()


async def test_background_server_is_reported_once_by_the_send_that_started_it(
    tmp_path: Path,
) -> None:
    up = tmp_path / "up"
    server = (
        "import socket,time; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        f"open({str(up)!r}, 'w').close(); time.sleep(60)"
    )
    async with Harness(config=full_access(str(tmp_path))) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        # The shell's prompt settles this send; the server listens in the background.
        text = f'python3 -c "{server}" & until [ -e {up} ]; do sleep 0.05; done; echo up'

        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": text})
        assert sent.value["waitReason"] == "stdin_read" and sent.value["exitCode"] == 0
        [listening] = sent.value["listening"]
        assert listening["address"] == "127.0.0.1"
        # Already listening before the next send's input: not news for its result.
        again = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo hi"})
        assert again.value["viewport"] == "hi\n" and "listening" not in again.value
        listed = await h.call_tool(agent, "terminal_list", {})
        assert listed.value["sessions"][0]["listening"] == [listening]
        await agent.dispose()


async def test_a_program_that_listens_nowhere_settles_by_silence_as_before() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        sent = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": "echo start; sleep 30", "timeoutMs": 5000},
        )
        assert sent.value["waitReason"] == "inferred_idle" and "listening" not in sent.value
        assert "no output for a while" in sent.text
        await agent.dispose()


@pytest.mark.skipif(not BwrapSandbox(BwrapConfig()).available(), reason="no bubblewrap here")
async def test_a_server_in_a_sandbox_with_its_own_network_is_found(tmp_path: Path) -> None:
    config = {"sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        sid = await _open(h, agent)
        value = await _serve(h, agent, sid, "127.0.0.1")
        assert value["waitReason"] == "inferred_idle", value
        served = SERVED.search(str(value["viewport"]))
        assert served is not None
        assert [(e["address"], e["port"]) for e in value["listening"]] == [  # type: ignore[attr-defined]
            ("127.0.0.1", int(served.group(2)))
        ]
        await agent.dispose()
