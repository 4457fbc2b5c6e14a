"""A relay hands its stdin and stdout to the daemon (SCM_RIGHTS) and leaves the data path.

The daemon then reads the harness's frames from the relay's pipe and writes into the
other one itself; the relay only keeps the exec session open. An older daemon (no
``.fds`` socket) still gets a copying relay. Each test proves which of the two carried the
traffic by looking at the relay's descriptors: a relay that copies holds both pipes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest, WaitReason
from dsh_terminal_core.worlds.connection import Connection
from dsh_terminal_core.worlds.frames import DEFAULT_MAX_FRAME
from dsh_terminal_core.worlds.handoff import handoff_path
from dsh_terminal_core.worlds.messages import PROTOCOL_VERSIONS

from .test_world_daemon import daemon  # noqa: F401  (the fixture)
from .world_fixture import needs_namespaces

pytestmark = [needs_namespaces, pytest.mark.bwrap]

RELAY = [sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--socket"]


def _held_by(pid: int) -> set[str]:
    """What the process's descriptors point at (``pipe:[inode]`` for a pipe)."""
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return held


def _pipes(process: asyncio.subprocess.Process) -> tuple[str, str]:
    """The pipes of ``process``'s stdin and stdout, as /proc names them."""
    transport = process._transport  # type: ignore[attr-defined]
    return tuple(  # type: ignore[return-value]
        f"pipe:[{os.fstat(transport.get_pipe_transport(n).get_extra_info('pipe').fileno()).st_ino}]"
        for n in (0, 1)
    )


def _link_pipes(link: object) -> tuple[str, str]:
    """The pipes a world link writes and reads (the relay's stdin and stdout)."""
    writer = link._conn._writer  # type: ignore[attr-defined]
    return tuple(  # type: ignore[return-value]
        f"pipe:[{os.fstat(transport.get_extra_info('pipe').fileno()).st_ino}]"
        for transport in (writer._transport, writer._read_transport)
    )


async def _relay_let_go(process: asyncio.subprocess.Process) -> bool:
    """Whether the relay closed its copies of its stdio pipes within 5 s.

    The daemon answers on the pipes as soon as it has them, and the relay closes its own
    copies only once it read the daemon's ``TAKEN``: a hello read first does not mean the
    relay let go yet, so this waits for the fact itself (the relay's /proc) to change.
    """
    pipes = set(_pipes(process))
    deadline = asyncio.get_running_loop().time() + 5
    while _held_by(process.pid) & pipes:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def _relay(socket_path: Path) -> tuple[asyncio.subprocess.Process, Connection]:
    process = await asyncio.create_subprocess_exec(
        *RELAY, str(socket_path),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=DEFAULT_MAX_FRAME,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    connection = Connection(process.stdout, process.stdin, max_frame=DEFAULT_MAX_FRAME)
    hello = {"versions": list(PROTOCOL_VERSIONS), "client": {"key": "fd"}, "pid": os.getpid()}
    peer = await connection.handshake(hello, timeout_s=20)
    assert peer["capabilities"]["daemon"] is True
    return process, connection


@pytest.mark.parametrize("daemon_takes_fds", [True, False], ids=["handoff", "older-daemon"])
async def test_sends_through_a_relay_settle_whether_it_hands_over_or_copies(
    daemon: Path,  # noqa: F811
    daemon_takes_fds: bool,
) -> None:
    if not daemon_takes_fds:
        os.unlink(handoff_path(str(daemon)))  # what an older daemon has: no such socket
    config = {
        "sandbox-policy": {"mode": "danger-full-access"},
        "worlds": {"worlds": {"r": {"command": [*RELAY, str(daemon)], "key": "handoff"}}},
    }
    async with Harness(config=config) as h:
        agent = h.create_agent("handoff")
        terminals = h.ctx.terminals
        sid = (await terminals.spawn(agent, SpawnRequest(type="shell", world="r"))).session_id
        for n in range(20):
            request = SendRequest(text=f"echo n-$(({n}*3))")
            sent = await terminals.start_send(agent, sid, request).done
            assert sent.wait_reason is WaitReason.STDIN_READ
            assert sent.viewport.strip().splitlines()[-1] == f"n-{n * 3}"
        link = h.ctx.worlds._links["r"]
        process = link._process
        assert process is not None
        held = _held_by(process.pid) & set(_link_pipes(link))
        assert held == (set() if daemon_takes_fds else set(_link_pipes(link)))
        await agent.dispose()


async def test_eof_on_a_handed_over_stdin_ends_the_connection_and_the_relay(
    daemon: Path,  # noqa: F811
) -> None:
    process, connection = await _relay(daemon)
    assert await _relay_let_go(process)  # the daemon answers alone
    assert process.stdin is not None and process.stdout is not None
    process.stdin.close()
    rest = await asyncio.wait_for(process.stdout.read(), 10)  # EOF: the daemon closed it
    assert await asyncio.wait_for(process.wait(), 10) == 0
    assert process.stderr is not None
    said = await process.stderr.read()
    assert b"no world daemon answers" not in said, said  # the daemon lives: nothing to say
    del rest, connection


@pytest.mark.parametrize("round_", range(5))
async def test_a_killed_relay_ends_the_daemons_side_of_the_handed_over_connection(
    daemon: Path,  # noqa: F811
    round_: int,
) -> None:
    process, _connection = await _relay(daemon)
    assert process.stdout is not None
    assert await _relay_let_go(process)
    process.send_signal(signal.SIGKILL)
    await process.wait()
    # Only the daemon holds the stdout pipe's write end now: it closes it as it sees the
    # relay's socket close, long before any heartbeat (30 s) could.
    await asyncio.wait_for(process.stdout.read(), 5)
    assert process.stdin is not None
    process.stdin.close()


async def test_the_daemon_still_serves_plain_socket_connections_beside_relays(
    daemon: Path,  # noqa: F811
) -> None:
    process, _relayed = await _relay(daemon)
    reader, writer = await asyncio.open_unix_connection(str(daemon))
    direct = Connection(reader, writer, max_frame=DEFAULT_MAX_FRAME)
    hello = {"versions": list(PROTOCOL_VERSIONS), "client": {"key": "fd"}, "pid": os.getpid()}
    peer = await direct.handshake(hello, timeout_s=20)
    assert peer["t"] == "hello"
    direct.close()
    assert process.stdin is not None
    process.stdin.close()
    assert await asyncio.wait_for(process.wait(), 10) == 0
