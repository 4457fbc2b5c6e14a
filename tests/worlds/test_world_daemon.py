"""A world daemon: sessions that outlive the harness, taken back by a harness with the key.

The daemon runs in its own pid, IPC and UTS namespaces (bubblewrap) and listens on a
unix socket; harnesses reach it as a ``socket`` world. A harness SIGKILLed mid-send is a
real one, in its own process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_bash.census import shells_marked
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, SpawnRequest, WaitReason
from dsh_terminal_core.worlds.connection import Connection
from dsh_terminal_core.worlds.frames import DEFAULT_MAX_FRAME
from dsh_terminal_core.worlds.session import WorldSession

from .world_fixture import BWRAP, needs_namespaces

pytestmark = [needs_namespaces, pytest.mark.bwrap]


@pytest.fixture
async def daemon(tmp_path: Path) -> AsyncIterator[Path]:
    """A daemon in its own namespaces; stopped with SIGTERM (its sessions close then)."""
    socket_path = tmp_path / "run" / "world.sock"
    process = subprocess.Popen(
        [
            BWRAP or "bwrap",
            "--dev-bind",
            "/",
            "/",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
            "--proc",
            "/proc",
            sys.executable,
            "-m",
            "dsh_terminal_core.cli",
            "world",
            "serve",
            "--socket",
            str(socket_path),
            "--sandbox",
            "danger-full-access",
        ],
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 60
        for line in process.stderr:
            if b"listening on" in line:
                break
            assert time.monotonic() < deadline, "the daemon did not start"
        else:
            pytest.fail("the daemon exited before listening")
        yield socket_path
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _config(socket_path: Path, key: str, **entry: Any) -> dict[str, Any]:
    return {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"d": {"socket": str(socket_path), "key": key, **entry}}},
    }


_HARNESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from dsh_terminal_core import Harness
    from dsh_terminal_core.registry import SendRequest, SpawnRequest

    async def main():
        config = json.loads(sys.argv[1])
        h = Harness(config=config)
        await h.start()
        agent = h.create_agent(sys.argv[2])
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="d"))
        sid = opened.session_id
        await h.ctx.terminals.start_send(agent, sid, SendRequest(text="export KEPT=yes")).done
        h.ctx.terminals.start_send(
            agent, sid,
            SendRequest(text="for i in 1 2 3; do sleep 0.3; echo tick-$i; done", timeout_ms=60000),
        )
        # Started means written and echoed by the world's shell: then the kill may come.
        from dsh_terminal_core.registry import ReadRequest
        while "for i in" not in h.ctx.terminals.read(agent, sid, ReadRequest()).text:
            await asyncio.sleep(0.01)
        print(sid, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def _start_harness(config: dict[str, Any], agent_id: str) -> tuple[subprocess.Popen[str], str]:
    import json

    process = subprocess.Popen(
        [sys.executable, "-c", _HARNESS, json.dumps(config), agent_id],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    sid = process.stdout.readline().strip()
    assert sid.startswith("pty-"), sid
    return process, sid


def _kill(process: subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()
    if process.stdout is not None:
        process.stdout.close()


async def _until(condition: Any, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_the_socket_is_private_to_its_user(daemon: Path) -> None:
    assert stat.S_IMODE(os.stat(daemon).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(daemon.parent).st_mode) == 0o700


def test_a_socket_in_a_shared_sticky_directory_leaves_the_directory_shared(
    tmp_path: Path,
) -> None:
    """``--socket /tmp/world.sock`` once made ``/tmp`` itself 0700, closed to every other
    user; a directory the daemon does not own alone (sticky) keeps its mode."""
    from dsh_terminal_core.worlds.serve import _listen

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    listener = _listen(str(shared / "world.sock"))
    try:
        assert stat.S_IMODE(os.stat(shared / "world.sock").st_mode) == 0o600
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    finally:
        listener.close()


@pytest.mark.parametrize("round_", range(2))
async def test_a_killed_harness_sessions_come_back_to_one_with_its_key(
    daemon: Path, round_: int
) -> None:
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    key = uuid.uuid4().hex
    old, sid = _start_harness(_config(daemon, key), agent_id)
    _kill(old)  # mid-send: the loop of ticks keeps running in the world
    started = time.monotonic()
    async with Harness(config=_config(daemon, key)) as h:
        agent = h.create_agent(agent_id)
        await agent.arrived()
        [row] = h.ctx.terminals.list(agent)
        assert (row.session_id, row.world) == (sid, "d")
        terminals = h.ctx.terminals

        def ticked() -> bool:
            page = terminals.read(agent, sid, ReadRequest(offset=1, count=500))
            return "tick-3" in page.text

        await _until(ticked)
        # Everything printed while no harness was attached, by absolute line.
        page = terminals.read(agent, sid, ReadRequest(offset=1, count=500))
        lines = page.text.splitlines()
        assert lines.index("tick-1") < lines.index("tick-2") < lines.index("tick-3")
        # The send the old harness left running is this session's until it settles.
        busy = terminals.get_session(agent, sid)
        assert isinstance(busy, WorldSession)
        await _until(lambda: not busy.sending)
        sent = await terminals.start_send(agent, sid, SendRequest(text="echo $KEPT")).done
        assert sent.wait_reason is WaitReason.STDIN_READ and sent.viewport.strip() == "yes"
        assert time.monotonic() - started < 10
        # A new session in the new harness never takes the adopted id.
        fresh = await terminals.spawn(agent, SpawnRequest(type="shell", world="d"))
        assert fresh.session_id != sid
        await agent.dispose()
    await _until(lambda: not shells_marked({"DSH_SESSION_ID": agent_id}))


async def test_another_key_sees_nothing_and_the_lease_ends_it(daemon: Path) -> None:
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    old, _sid = _start_harness(_config(daemon, "key-one", lease_s=2), agent_id)
    _kill(old)
    async with Harness(config=_config(daemon, "key-two")) as h:
        agent = h.create_agent(agent_id)
        await agent.arrived()
        assert h.ctx.terminals.list(agent) == []
        await agent.dispose()
    assert shells_marked({"DSH_SESSION_ID": agent_id})  # still there, for its lease
    await _until(lambda: not shells_marked({"DSH_SESSION_ID": agent_id}), timeout_s=20)


async def test_garbage_on_one_connection_leaves_the_others_working(daemon: Path) -> None:
    async with Harness(config=_config(daemon, "k")) as h:
        agent = h.create_agent("steady")
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="d"))).session_id
        reader, writer = await asyncio.open_unix_connection(str(daemon), limit=DEFAULT_MAX_FRAME)
        rogue = Connection(reader, writer, max_frame=DEFAULT_MAX_FRAME)
        await rogue.handshake({"versions": [1]}, timeout_s=20)
        writer.write(b"\xff\xff\xff\xff")  # a frame far over the limit
        frames = [frame async for frame in rogue.frames()]
        assert frames[-1].type == "bye" and frames[-1].header["code"] == "FRAME_TOO_LARGE"
        rogue.close()
        sent = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo still")).done
        assert sent.wait_reason is WaitReason.STDIN_READ and "still" in sent.viewport
        await agent.dispose()


async def test_an_unreachable_daemon_is_unavailable(tmp_path: Path) -> None:
    from dsh_terminal_core.kernel.errors import TerminalError

    async with Harness(config=_config(tmp_path / "none.sock", "k")) as h:
        agent = h.create_agent("nobody")
        await agent.arrived()  # adoption fails quietly: there is nothing to adopt
        with pytest.raises(TerminalError) as refused:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="d"))
        assert refused.value.code == "WORLD_UNAVAILABLE"
        with contextlib.suppress(Exception):
            await agent.dispose()


async def test_a_relay_carries_a_command_world_to_the_daemon(daemon: Path) -> None:
    # What `kubectl exec -i POD -- dsh-terminal world --stdio --socket PATH` starts.
    relay = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"r": {"command": [*relay, str(daemon)], "key": "relayed"}}},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("relayed")
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="r"))).session_id
        sent = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo via-relay")).done
        assert sent.wait_reason is WaitReason.STDIN_READ and sent.viewport.strip() == "via-relay"
        await agent.dispose()


async def test_a_relay_with_no_daemon_is_unavailable(tmp_path: Path) -> None:
    from dsh_terminal_core.kernel.errors import TerminalError

    relay = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"r": {"command": [*relay, str(tmp_path / "gone.sock")]}}},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("relayed")
        with pytest.raises(TerminalError) as refused:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="r"))
        assert refused.value.code == "WORLD_UNAVAILABLE"
        assert "no world daemon answers" in refused.value.message
        await agent.dispose()


@pytest.mark.parametrize("round_", range(3))
async def test_a_lost_relay_is_reconnected_and_the_send_in_flight_settles(
    daemon: Path, round_: int
) -> None:
    relay = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"r": {"command": [*relay, str(daemon)], "key": "resume"}}},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent(f"resume-{round_}")
        terminals = h.ctx.terminals
        sid = (await terminals.spawn(agent, SpawnRequest(type="shell", world="r"))).session_id
        op = terminals.start_send(
            agent, sid, SendRequest(text="sleep 0.5; echo done-late", timeout_ms=20000)
        )
        link = h.ctx.worlds._links["r"]
        await _until(lambda: "sleep 0.5" in terminals.read(agent, sid, ReadRequest()).text)
        assert link._process is not None
        link._process.kill()  # the relay dies; the daemon and the shell live on
        result = await asyncio.wait_for(op.done, 20)
        assert result.wait_reason is WaitReason.STDIN_READ
        assert "done-late" in result.viewport
        assert h.ctx.worlds._links["r"] is not link  # a new connection
        again = await terminals.start_send(agent, sid, SendRequest(text="echo resumed")).done
        assert again.wait_reason is WaitReason.STDIN_READ and again.viewport.strip() == "resumed"
        await agent.dispose()


async def test_a_clean_shutdown_with_persist_leaves_the_sessions_to_the_next_harness(
    daemon: Path,
) -> None:
    agent_id = f"persist-{uuid.uuid4().hex[:8]}"
    config = _config(daemon, "upgrade", persist=True)
    async with Harness(config=config) as h:
        agent = h.create_agent(agent_id)
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="d"))).session_id
        await h.ctx.terminals.start_send(agent, sid, SendRequest(text="export P=kept")).done
    # The server upgraded: a new harness, the same key and agent id.
    async with Harness(config=config) as h:
        agent = h.create_agent(agent_id)
        await agent.arrived()
        [row] = h.ctx.terminals.list(agent)
        assert row.session_id == sid
        echoed = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo $P")).done
        assert echoed.viewport.strip() == "kept"
        await agent.dispose()  # disposing always tears down, persist or not
    await _until(lambda: not shells_marked({"DSH_SESSION_ID": agent_id}))


async def test_without_persist_a_clean_shutdown_closes_them(daemon: Path) -> None:
    agent_id = f"no-persist-{uuid.uuid4().hex[:8]}"
    async with Harness(config=_config(daemon, "k")) as h:
        agent = h.create_agent(agent_id)
        await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="d"))
    await _until(lambda: not shells_marked({"DSH_SESSION_ID": agent_id}))


async def test_a_silent_channel_is_found_by_the_heartbeat_and_replaced(
    daemon: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A relay that stops forwarding without closing: what a vanished ssh peer or a cut
    # kubectl exec stream looks like from here. Only the heartbeat can tell. The relay
    # copies (no .fds socket, as with an older daemon): a relay that handed its stdio to
    # the daemon is out of the data path, and stopping it silences nothing.
    from dsh_terminal_core.worlds import connection
    from dsh_terminal_core.worlds.handoff import handoff_path

    os.unlink(handoff_path(str(daemon)))

    monkeypatch.setattr(connection, "HEARTBEAT_S", 0.2)
    relay = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"r": {"command": [*relay, str(daemon)], "key": "beat"}}},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("beat")
        terminals = h.ctx.terminals
        sid = (await terminals.spawn(agent, SpawnRequest(type="shell", world="r"))).session_id
        link = h.ctx.worlds._links["r"]
        assert link._process is not None
        frozen = link._process.pid
        os.kill(frozen, signal.SIGSTOP)
        try:
            await _until(lambda: h.ctx.worlds._links.get("r") not in (None, link), 10)
            session = terminals.get_session(agent, sid)
            assert isinstance(session, WorldSession)
            await _until(lambda: session.suspended is None, 10)
            sent = await terminals.start_send(agent, sid, SendRequest(text="echo after-beat")).done
            assert sent.viewport.strip() == "after-beat"
        finally:
            with contextlib.suppress(ProcessLookupError):  # reaped by the harness already
                os.kill(frozen, signal.SIGCONT)
        await agent.dispose()


_ISOLATED_HARNESS = textwrap.dedent(
    """
    import asyncio, json, os, sys
    from dsh_terminal_core import Harness
    from dsh_terminal_core.registry import SendRequest, SpawnRequest

    async def main():
        async with Harness(config=json.loads(sys.argv[1])) as h:
            agent = h.create_agent("isolated")
            opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="d"))
            sid = opened.session_id
            sent = await h.ctx.terminals.start_send(
                agent, sid, SendRequest(text="echo $$; (exit 4)")
            ).done
            shell = int(sent.viewport.split()[0])
            # This harness sees none of its shells: they are in the daemon's namespace.
            visible = [int(p) for p in os.listdir("/proc") if p.isdigit()]
            print(json.dumps({
                "reason": str(sent.wait_reason), "exit": sent.exit_code,
                "shell_visible": shell in visible and os.path.exists(f"/proc/{shell}/environ")
                and b"DSH_SHELL" in open(f"/proc/{shell}/environ", "rb").read(),
                "processes_here": len(visible),
            }))
            await agent.dispose()

    asyncio.run(main())
    """
)


async def test_a_harness_in_its_own_pid_namespace_gets_every_fact_from_the_world(
    daemon: Path,
) -> None:
    # SPEC §21 (b): the harness cannot read a single fact of its shells itself.
    import json

    config = json.dumps(_config(daemon, "isolated"))
    run = await asyncio.create_subprocess_exec(
        BWRAP or "bwrap",
        "--dev-bind", "/", "/", "--unshare-pid", "--die-with-parent", "--proc", "/proc",
        sys.executable, "-c", _ISOLATED_HARNESS, config,
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(run.communicate(), 60)
    assert run.returncode == 0
    seen = json.loads(out.decode().strip().splitlines()[-1])
    assert seen["reason"] == "stdin_read" and seen["exit"] == 4
    assert not seen["shell_visible"]
    assert seen["processes_here"] < 10  # its own namespace: bwrap, python, a few helpers


@pytest.mark.parametrize("through", ["socket", "relay"])
async def test_a_daemon_killed_mid_send_settles_it_session_exit_within_a_second(
    tmp_path: Path, through: str
) -> None:
    socket_path = tmp_path / "run" / "world.sock"
    process = subprocess.Popen(
        [
            sys.executable, "-m", "dsh_terminal_core.cli", "world", "serve",
            "--socket", str(socket_path), "--sandbox", "danger-full-access",
        ],
        stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        for line in process.stderr:
            if b"listening on" in line:
                break
        relay = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]
        entry: dict[str, Any] = (
            {"socket": str(socket_path), "key": "k"}
            if through == "socket"
            else {"command": [*relay, str(socket_path)], "key": "k"}
        )
        config = {
            "sandbox-policy": {"mode": "danger-full-access"},
            "worlds": {"worlds": {"d": entry}},
        }
        async with Harness(config=config) as h:
            agent = h.create_agent("doomed")
            terminals = h.ctx.terminals
            sid = (await terminals.spawn(agent, SpawnRequest(type="shell", world="d"))).session_id
            op = terminals.start_send(agent, sid, SendRequest(text="sleep 30", timeout_ms=60000))
            await _until(lambda: "sleep 30" in terminals.read(agent, sid, ReadRequest()).text)
            os.killpg(process.pid, signal.SIGKILL)  # the daemon and everything it owns
            killed = time.monotonic()
            result = await asyncio.wait_for(op.done, 10)
            assert time.monotonic() - killed < 1.0
            assert result.wait_reason is WaitReason.SESSION_EXIT
            with pytest.raises(Exception) as refused:
                terminals.start_send(agent, sid, SendRequest(text="echo again"))
            assert "SESSION_EXITED" in str(getattr(refused.value, "code", ""))
            said = str(refused.value)
            assert "daemon is gone" in said and "no world daemon answers" in said
            if through == "relay":
                # The relay said so as its stream ended: no second relay was started (a
                # whole interpreter, most of a second) only to hear the same.
                assert "the world daemon ended the connection" in said
            await agent.dispose()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stderr is not None:
            process.stderr.close()


async def test_a_relay_world_with_a_key_gives_sessions_back_after_a_restart(daemon: Path) -> None:
    # The shipped kubectl config's shape: a command relaying to the daemon, a key, persist.
    # Adoption asks such a world too, not only `socket` worlds (SPEC §29).
    relay = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]
    key = f"relay-{uuid.uuid4().hex}"
    entry = {"command": [*relay, str(daemon)], "key": key, "persist": True}
    config = {"sandbox-policy": {"mode": "danger-full-access"}, "worlds": {"worlds": {"r": entry}}}
    async with Harness(config=config) as h:
        agent = h.create_agent("relayed")
        sid = (await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="r"))).session_id
        await h.ctx.terminals.start_send(agent, sid, SendRequest(text="export KEPT=relayed")).done
    async with Harness(config=config) as h:
        agent = h.create_agent("relayed")
        await agent.arrived()
        [row] = h.ctx.terminals.list(agent)
        assert row.session_id == sid and row.world == "r"
        done = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo $KEPT")).done
        assert done.viewport.strip() == "relayed"
        await agent.dispose()
