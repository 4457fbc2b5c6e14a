"""A world in its own namespaces, reached over ``dsh-terminal world --stdio``.

Every send here is settled by the world's readiness ladder with production timings,
and comes back as one settlement; what the harness reads it reads from its mirror.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import DshError, TerminalError
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import (
    ReadRequest,
    SearchRequest,
    SendRequest,
    SpawnRequest,
    WaitReason,
)
from dsh_terminal_core.worlds.connection import Connection
from dsh_terminal_core.worlds.frames import DEFAULT_MAX_FRAME

from .world_fixture import needs_namespaces, world_command, world_config

pytestmark = [needs_namespaces, pytest.mark.bwrap]


def _world_link_process(h: Harness) -> int:
    link = h.ctx.worlds._links["ns"]
    assert link._process is not None
    return int(link._process.pid)


@pytest.mark.parametrize("loop", ["uvloop", "asyncio"])
async def test_a_send_in_a_world_settles_there_with_its_exit_code(loop: str) -> None:
    pytest.importorskip(loop)
    config = world_config(ns={"command": world_command(loop=loop)})
    async with Harness(config=config) as h:
        agent = h.create_agent("agent-1")
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="ns"))
        assert opened.world == "ns"
        op = h.ctx.terminals.start_send(
            agent, opened.session_id, SendRequest(text="echo $$ $(hostname); false")
        )
        result = await op.done
        assert result.wait_reason is WaitReason.STDIN_READ
        assert result.exit_code == 1
        shell_pid, host = result.viewport.split()
        # The pid is the world's: in the harness's /proc it is not that shell.
        assert int(shell_pid) == opened.pid or opened.pid < 100
        assert host == "world-ns"
        seen_here = f"/proc/{shell_pid}"
        if os.path.exists(seen_here):
            assert os.readlink(f"{seen_here}/ns/pid") == os.readlink("/proc/self/ns/pid")
        # State persists, and the facts of a settlement reach the listing.
        await h.ctx.terminals.start_send(agent, opened.session_id, SendRequest(text="cd /tmp")).done
        [row] = h.ctx.terminals.list(agent)
        assert row.world == "ns" and row.cwd == "/tmp"
        assert h.ctx.worlds._links["ns"].hello["eventLoop"] == loop  # the loop asked for
        await agent.dispose()


async def test_what_a_send_collected_reaches_its_reader_with_the_settlement() -> None:
    """The output a send collected after its last streamed piece travels with the
    settlement: a reader of the operation (a background job's) sees every line."""
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        op = h.ctx.terminals.start_send(
            agent, sid, SendRequest(text="echo first; echo second; false")
        )
        result = await op.done
        assert result.wait_reason is WaitReason.STDIN_READ and result.exit_code == 1
        collected = op.read_output()
        assert "first\n" in collected and "second\n" in collected, collected
        assert op.read_output() == ""  # consumed: a cursor, as a local send's
        await agent.dispose()


async def test_reads_come_from_a_mirror_numbered_as_the_world_numbers() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        done = await h.ctx.terminals.start_send(
            agent, sid, SendRequest(text="for i in $(seq 1 300); do echo line-$i; done")
        ).done
        assert done.wait_reason is WaitReason.STDIN_READ
        page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=101, count=3))
        assert page.text.splitlines() == ["line-100", "line-101", "line-102"]
        lines, cursor = h.ctx.terminals.complete_lines_since(agent, sid, 0)
        assert lines[1:4] == ["line-1", "line-2", "line-3"] and cursor == len(lines)
        found = await h.ctx.terminals.search(agent, sid, SearchRequest(pattern="line-150"))
        [match] = [m for m in found.matches if m.line == "line-150"]
        page = h.ctx.terminals.read(agent, sid, ReadRequest(offset=match.line_number, count=1))
        assert page.text == "line-150"
        await agent.dispose()


async def test_an_unknown_world_names_the_configured_ones() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        with pytest.raises(TerminalError) as refused:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="mars"))
        assert refused.value.code == "INVALID_ARGUMENT"
        assert "local" in refused.value.message and "ns" in refused.value.message
        await agent.dispose()


async def test_a_world_that_cannot_start_is_unavailable_with_its_stderr() -> None:
    broken = {"command": ["sh", "-c", "echo no-agent-here >&2; exit 3"]}
    missing = {"command": ["/nonexistent/dsh-terminal", "world", "--stdio"]}
    async with Harness(config=world_config(broken=broken, missing=missing)) as h:
        agent = h.create_agent("agent-1")
        with pytest.raises(TerminalError) as refused:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="broken"))
        assert refused.value.code == "WORLD_UNAVAILABLE"
        assert "no-agent-here" in refused.value.message
        with pytest.raises(TerminalError) as refused:
            await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="missing"))
        assert refused.value.code == "WORLD_UNAVAILABLE"
        assert "could not start" in refused.value.message
        await agent.dispose()


@pytest.mark.parametrize("round_", range(3))
async def test_a_killed_world_settles_the_send_in_flight_within_a_second(round_: int) -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30", timeout_ms=60000))
        await asyncio.sleep(0)  # the send is on its way; nothing here waits for time
        os.killpg(_world_link_process(h), signal.SIGKILL)
        killed_at = time.monotonic()
        result = await asyncio.wait_for(op.done, 5)
        assert time.monotonic() - killed_at < 1.0
        assert result.wait_reason is WaitReason.SESSION_EXIT
        assert h.ctx.terminals.list(agent)[0].status.kind == "exited"
        with pytest.raises(TerminalError) as refused:
            h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo again"))
        assert refused.value.code == "SESSION_EXITED" and "ns" in refused.value.message
        await agent.dispose()


async def test_the_next_open_after_a_lost_world_starts_a_new_one() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="ns"))
        first = dict(h.ctx.worlds.world_id("ns"))
        os.killpg(_world_link_process(h), signal.SIGKILL)
        await asyncio.wait_for(_until_lost(h), 5)
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="ns"))
        assert h.ctx.worlds.world_id("ns") != first
        done = await h.ctx.terminals.start_send(
            agent, opened.session_id, SendRequest(text="echo fresh")
        ).done
        assert done.wait_reason is WaitReason.STDIN_READ and "fresh" in done.viewport
        await agent.dispose()


async def _open(h: Harness, agent: Agent) -> str:
    opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="ns"))
    return opened.session_id


async def _until_lost(h: Harness) -> None:
    while h.ctx.worlds._links["ns"].lost is None:
        await asyncio.sleep(0.01)


async def _raw_world() -> tuple[asyncio.subprocess.Process, Connection]:
    process = await asyncio.create_subprocess_exec(
        *world_command(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdin is not None
    return process, Connection(process.stdout, process.stdin, max_frame=DEFAULT_MAX_FRAME)


async def test_a_version_nobody_speaks_is_refused_and_the_world_exits() -> None:
    process, conn = await _raw_world()
    await conn.handshake({"versions": [99]}, timeout_s=20)
    frames = [frame async for frame in conn.frames()]
    assert [f.type for f in frames] == ["bye"]
    assert frames[0].header["code"] == "VERSION_UNSUPPORTED"
    assert await asyncio.wait_for(process.wait(), 10) == 0


async def test_a_garbage_frame_closes_that_connection_with_its_code() -> None:
    process, conn = await _raw_world()
    await conn.handshake({"versions": [1]}, timeout_s=20)
    assert process.stdin is not None
    process.stdin.write(b"\x00\x00\x00\x05\x00\x03{x}")
    frames = [frame async for frame in conn.frames()]
    assert frames and frames[-1].type == "bye"
    assert frames[-1].header["code"] == "MALFORMED_FRAME"
    assert await asyncio.wait_for(process.wait(), 10) == 0


async def test_an_unknown_request_is_an_error_and_the_connection_lives() -> None:
    process, conn = await _raw_world()
    await conn.handshake({"versions": [1]}, timeout_s=20)
    conn.send({"t": "teleport", "id": 1})
    conn.send({"t": "ping", "n": 7})
    frames = conn.frames()
    first = await anext(frames)
    assert first.type == "error" and first.header["code"] == "UNKNOWN_TYPE"
    second = await anext(frames)
    assert second.type == "pong" and second.header["n"] == 7
    conn.close()
    assert await asyncio.wait_for(process.wait(), 10) == 0


async def test_a_malformed_send_is_an_error_and_the_connection_lives() -> None:
    process, conn = await _raw_world()
    await conn.handshake({"versions": [1]}, timeout_s=20)
    conn.send({"t": "send", "id": 1, "sid": "pty-1"})  # no op: nothing to settle
    conn.send({"t": "send", "id": 2, "sid": "nobody", "op": "o1", "submit": True})
    conn.send({"t": "ping", "n": 7})
    frames = conn.frames()
    first = await anext(frames)
    assert first.type == "error" and first.header["re"] == 1
    assert first.header["code"] == "MALFORMED_FRAME"
    second = await anext(frames)
    assert second.type == "settled" and second.header["op"] == "o1"
    assert second.header["error"]["code"] == "NO_SESSION"
    third = await anext(frames)
    assert third.type == "pong" and third.header["n"] == 7
    conn.close()
    assert await asyncio.wait_for(process.wait(), 10) == 0


def test_a_terminal_on_stdin_is_refused_at_once() -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio"],
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)
    assert run.returncode == 2
    assert "kubectl exec -i" in run.stderr and "without -t" in run.stderr


def test_a_world_harness_config_is_checked_at_startup() -> None:
    bad = {"worlds": {"worlds": {"x": {"command": []}}}}
    with pytest.raises(DshError):
        asyncio.run(Harness(config=bad).start())


async def test_cancel_is_a_real_interrupt_in_the_world() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 30", timeout_ms=60000))
        started = time.monotonic()
        await op.cancel()
        result = await asyncio.wait_for(op.done, 10)
        assert time.monotonic() - started < 5
        assert result.wait_reason is WaitReason.STDIN_READ and result.exit_code == 130
        after = await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo next")).done
        assert after.wait_reason is WaitReason.STDIN_READ and after.viewport.strip() == "next"
        await agent.dispose()


async def test_a_secret_is_typed_in_the_world_and_never_seen_here() -> None:
    from dsh_terminal_core.kernel.secret import Secret

    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        terminals = h.ctx.terminals
        asked = await terminals.start_send(
            agent, sid, SendRequest(text='read -rs -p "Password: " PW; echo; echo len=${#PW}')
        ).done
        assert asked.wait_reason is WaitReason.STDIN_READ and asked.input_hidden
        assert terminals.hidden_prompt(agent, sid).startswith("Password:")
        typed = await terminals.start_send(
            agent, sid, SendRequest(text="", secret=Secret("hunter2-in-world"))
        ).done
        assert typed.wait_reason is WaitReason.STDIN_READ and "len=16" in typed.viewport
        page = terminals.read(agent, sid, ReadRequest(offset=1, count=500))
        assert "hunter2" not in page.text and "hunter2" not in typed.viewport
        # Not at a hidden prompt now: refused here, nothing sent.
        with pytest.raises(TerminalError) as refused:
            terminals.start_send(agent, sid, SendRequest(text="", secret=Secret("again")))
        assert refused.value.code == "NOT_AT_SECRET_PROMPT"
        await agent.dispose()


async def test_signal_and_resize_reach_the_world() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        terminals = h.ctx.terminals
        terminals.resize(agent, sid, 30, 100)
        shown = await terminals.start_send(agent, sid, SendRequest(text="stty size")).done
        assert shown.viewport.strip() == "30 100"
        op = terminals.start_send(agent, sid, SendRequest(text="sleep 30", timeout_ms=60000))
        await _until_running(h, agent, sid)
        signalled = await terminals.signal(agent, sid, "SIGINT")
        assert signalled.delivered
        result = await asyncio.wait_for(op.done, 10)
        assert result.exit_code == 130
        await agent.dispose()


async def _until_running(h: Harness, agent: Agent, sid: str) -> None:
    # The echo of the typed line is in the mirror once the world's shell has read it.
    while "sleep 30" not in h.ctx.terminals.read(agent, sid, ReadRequest(offset=1)).text:
        await asyncio.sleep(0.01)


async def test_the_randomized_oracle_never_settles_wrongly_in_a_world() -> None:
    from ..reliability.oracle import run_oracle

    report = await run_oracle(operations=240, seed=20261201, streams=4, world=world_command())
    assert report.operations >= 240
    assert report.wrong == 0 and report.unexpected == 0, report.failures[:5]


def test_the_kubernetes_recipe_config_is_a_valid_worlds_section() -> None:
    import json
    from pathlib import Path

    from dsh_terminal_core.worlds.config import WorldsConfig

    recipe = Path(__file__).resolve().parents[2] / "deploy" / "worlds" / "harness-config.json"
    section = json.loads(recipe.read_text())["worlds"]
    config = WorldsConfig(**section)
    [entry] = config.worlds.values()
    assert entry.command is not None and entry.command[:3] == ("kubectl", "exec", "-i")
    assert "-t" not in entry.command and "-it" not in entry.command
    assert config.default == "pod-0"


async def test_the_terminal_tools_open_in_a_world_and_say_so() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("tools-in-world")
        opened = await h.call_tool(agent, "terminal_open", {"world": "ns"})
        assert not opened.is_error, opened.text
        assert opened.value["world"] == "ns" and "in world ns" in opened.text
        sid = opened.value["sessionId"]
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "hostname"})
        assert sent.value["waitReason"] == "stdin_read" and "world-ns" in sent.value["viewport"]
        listed = await h.call_tool(agent, "terminal_list", {})
        [row] = listed.value["sessions"]
        assert row["world"] == "ns" and "in world ns" in listed.text
        here = await h.call_tool(agent, "terminal_open", {})
        assert here.value["world"] == "local"
        unknown = await h.call_tool(agent, "terminal_open", {"world": "mars"})
        assert unknown.is_error and "INVALID_ARGUMENT" in unknown.text and "ns" in unknown.text
        await agent.dispose()


@pytest.mark.slow
def test_the_readiness_fences_and_flows_pass_in_a_world() -> None:
    # The same modules, not copies: DSH_TEST_WORLD sends every shell they open to a
    # namespace world (tests/helpers.py), with production timings; only the tests that
    # read the local backend or the shell's /proc are skipped (marker local_only).
    root = Path(__file__).resolve().parents[2]
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "tests/bash/test_readiness_fences.py", "tests/bash/test_readiness_flows.py",
        ],
        cwd=root,
        # bash only: zsh and fish in a world are tested by test_shell_protocols.py, and
        # their share of these suites would double this run's time.
        env={**os.environ, "DSH_TEST_WORLD": "ns", "DSH_TEST_SHELLS": "shell"},
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    summary = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 0, run.stdout[-3000:]
    assert "failed" not in summary and " passed" in summary, summary


async def test_a_person_takes_over_a_world_session_and_hands_it_back() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        terminals = h.ctx.terminals
        assert await terminals.take_control(agent, sid) is True
        with pytest.raises(TerminalError) as refused:
            terminals.start_send(agent, sid, SendRequest(text="echo agent"))
        assert refused.value.code == "HUMAN_CONTROL"
        await terminals.type_as_person(agent, sid, "echo from-person-$(hostname)\r")
        while "from-person-world-ns\n" not in terminals.read(agent, sid, ReadRequest()).text + "\n":
            await asyncio.sleep(0.01)
        report = await terminals.hand_back(agent, sid)
        assert report is not None
        after = await terminals.start_send(agent, sid, SendRequest(text="echo agent-again")).done
        assert after.wait_reason is WaitReason.STDIN_READ
        assert after.viewport.strip() == "agent-again"
        await agent.dispose()


async def test_a_screen_session_in_a_world_shows_its_screen() -> None:
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("screen-in-world")
        opened = await h.call_tool(agent, "terminal_open", {"world": "ns", "screen": True})
        assert not opened.is_error, opened.text
        sid = opened.value["sessionId"]
        sent = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "clear; echo drawn-$(hostname)"}
        )
        assert sent.value["waitReason"] == "stdin_read"
        read = await h.call_tool(agent, "terminal_read", {"sessionId": sid, "screen": True})
        assert not read.is_error, read.text
        assert "drawn-world-ns" in read.text
        await agent.dispose()


async def test_a_world_records_its_sessions_where_they_run(tmp_path: Path) -> None:
    # SPEC §23 in every world: the world's operator turns recording on in its config;
    # the .cast files are written where the terminal lives.
    import json

    casts = tmp_path / "casts"
    casts.mkdir()
    world_conf = tmp_path / "world.json"
    world_conf.write_text(json.dumps({"recording": {"dir": str(casts)}}))
    command = [*world_command(), "--config", str(world_conf)]
    config = world_config()
    config["worlds"]["worlds"]["ns"] = {"command": command}
    async with Harness(config=config) as h:
        agent = h.create_agent("recorded")
        sid = await _open(h, agent)
        sent = await h.ctx.terminals.start_send(
            agent, sid, SendRequest(text="echo réc-$((6*7))")
        ).done
        assert "réc-42" in sent.viewport
        await agent.dispose()
    [cast] = list(casts.glob("*.cast"))
    lines = cast.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2
    events = [json.loads(line) for line in lines[1:]]
    assert any(e[1] == "o" and "réc-42" in e[2] for e in events)
    assert any(e[1] == "m" and e[2].startswith("send: stdin_read") for e in events)


async def test_a_send_read_together_with_the_cancel_before_it_starts_after_that_cancel() -> None:
    # The world starts a send the moment its frame is read, never ahead of a request read
    # before it: a cancel and the next send written in one loop turn (one write) take
    # effect in that order, or the send would find the cancelled one still running.
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        sid = await _open(h, agent)
        terminals = h.ctx.terminals
        for i in range(50):
            line = f"sleep 30 # round {i}"
            op = terminals.start_send(agent, sid, SendRequest(text=line, timeout_ms=60000))
            while line not in _tail(h, agent, sid):
                await asyncio.sleep(0.005)
            cancelling = op.cancel()
            await asyncio.sleep(0)  # the cancel's frame is queued, its write not yet made
            after = terminals.start_send(agent, sid, SendRequest(text=f"echo after-{i}"))
            await cancelling
            first, second = await asyncio.wait_for(asyncio.gather(op.done, after.done), 10)
            assert first.wait_reason is WaitReason.STDIN_READ
            assert second.wait_reason is WaitReason.STDIN_READ, (i, second)
            assert second.viewport.strip() == f"after-{i}", (i, second.viewport)
        await agent.dispose()


def _tail(h: Harness, agent: Agent, sid: str) -> str:
    """The session's last few lines, the open one included."""
    total = h.ctx.terminals.read(agent, sid, ReadRequest(count=1)).total_lines
    return h.ctx.terminals.read(agent, sid, ReadRequest(offset=max(1, total - 2))).text
