"""Which terminal waits are proof of "waiting for input", on real processes.

A wait on the terminal and on someone else's channel (a socket, another process's pipe)
is not; a wait that times out within a second is not; waits whose other wake-ups are the
process's own event descriptors are. Each negative case first checks that the program
really is blocked in its multiplexed wait, so "not proof" never means "not looked".
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh_terminal_core.provider import (
    Foreground,
    LocalTerminalProcess,
)
from dsh_terminal_core.provider.syscalls import Wait, current_table

from ..helpers import Output, Spawn, eventually

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

WAITER = str(Path(__file__).parents[1] / "fixtures" / "waiter.py")
BASH = ["/bin/bash", "--noprofile", "--norc", "-i"]
PROMPT = b"ps1> "
SPAWN_ENV = {"PS1": PROMPT.decode(), "TERM": "dumb"}
LOOKS = 20  # looks at a blocked negative case; each one must say "not proof"


def _waiting(process: LocalTerminalProcess) -> bool:
    seen: Foreground | None = process.inspect_foreground()
    return seen is not None and seen.input_waiting


def _blocked_in_wait(pid: int) -> bool:
    """True if ``pid``'s main thread sits in a multiplexing wait (select, poll, epoll)."""
    table = current_table()
    assert table is not None
    try:
        with open(f"/proc/{pid}/syscall") as handle:
            number = handle.read().split()[0]
    except (OSError, IndexError):
        return False
    call = table.waits.get(int(number)) if number.isdigit() else None
    return call is not None and call.kind is not Wait.READ


async def assert_not_proof(process: LocalTerminalProcess, pid: int | None = None) -> None:
    """The program is blocked in its wait, and every look says it is not proof."""
    pid = pid or process.pid
    for _ in range(LOOKS):
        await eventually(lambda: _blocked_in_wait(pid))
        seen = process.inspect_foreground()
        assert seen is not None and not seen.input_waiting, seen
        assert not process.is_reading_terminal(pid)
        await asyncio.sleep(0.01)


async def waiter(spawn: Spawn, *args: str) -> tuple[LocalTerminalProcess, Output]:
    process = await spawn([sys.executable, WAITER, *args])
    output = Output(process)
    await output.wait_for(f"ready {args[0]}".encode())
    return process, output


@pytest.fixture
async def tcp_port() -> AsyncIterator[int]:
    """A local server that accepts and then stays silent: the client waits on it."""

    async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(_hold, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()


@pytest.mark.parametrize("call", ["select", "poll", "epoll"])
async def test_terminal_and_tcp_connection_is_not_proof(
    spawn: Spawn, tcp_port: int, call: str
) -> None:
    process, output = await waiter(spawn, "tcp", str(tcp_port), call)
    await assert_not_proof(process)
    # The same program does read the terminal: a typed line reaches it.
    await process.write("hello\n")
    await output.wait_for(b"typed hello")


async def test_terminal_and_unix_connection_to_another_process_is_not_proof(
    spawn: Spawn, tmp_path: Path
) -> None:
    async def _hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    path = str(tmp_path / "server.sock")
    server = await asyncio.start_unix_server(_hold, path)
    try:
        process, _ = await waiter(spawn, "unix", path)
        await assert_not_proof(process)
    finally:
        server.close()
        await server.wait_closed()


async def test_terminal_and_udp_socket_is_not_proof(spawn: Spawn) -> None:
    process, _ = await waiter(spawn, "udp")
    await assert_not_proof(process)


async def test_pipe_written_by_a_child_is_not_proof(spawn: Spawn) -> None:
    process, output = await waiter(spawn, "childpipe")
    await assert_not_proof(process)
    await output.wait_for(b"child says hi")  # and the child was indeed the one to wake it


async def test_self_pipe_also_held_by_a_child_is_not_proof(spawn: Spawn) -> None:
    process, _ = await waiter(spawn, "sharedpipe")
    await assert_not_proof(process)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["selfpipe", "", "select"], id="pipe-select"),
        pytest.param(["selfpipe", "", "poll"], id="pipe-poll"),
        pytest.param(["selfpipe", "", "epoll"], id="pipe-epoll"),
        pytest.param(["socketpair", "", "select"], id="socketpair-select"),
        pytest.param(["socketpair", "", "epoll"], id="socketpair-epoll"),
        pytest.param(["eventfd"], id="eventfd-epoll"),
    ],
)
async def test_own_event_descriptors_keep_the_wait_exact(spawn: Spawn, args: list[str]) -> None:
    process, _ = await waiter(spawn, *args)
    await eventually(lambda: _waiting(process))
    assert process.is_reading_terminal(process.pid)


async def test_a_child_that_inherits_the_self_pipe_ends_the_proof(spawn: Spawn) -> None:
    # The "nobody else holds it" answer is remembered; a fork must invalidate it.
    process, output = await waiter(spawn, "selfpipe")
    await eventually(lambda: _waiting(process))
    await process.write("fork\n")
    await output.wait_for(b"typed fork")
    await assert_not_proof(process)


@pytest.mark.parametrize("millis", ["100", "1000"])
@pytest.mark.parametrize("call", ["select", "poll", "epoll"])
async def test_a_wait_that_times_out_within_a_second_is_not_proof(
    spawn: Spawn, call: str, millis: str
) -> None:
    process, _ = await waiter(spawn, "timeout", millis, call)
    await assert_not_proof(process)


@pytest.mark.parametrize("call", ["select", "poll", "epoll"])
async def test_a_wait_with_a_longer_timeout_is_proof(spawn: Spawn, call: str) -> None:
    process, _ = await waiter(spawn, "timeout", "3000", call)
    await eventually(lambda: _waiting(process))


async def test_read_with_a_timeout_counts_by_its_length(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_for(PROMPT)
    await process.write("echo read-on; read -t 5 x; echo done5\n")
    await output.wait_for(b"read-on\r\n")
    await eventually(lambda: _waiting(process))  # bash's read builtin: pselect6, 5 s
    await process.write("\n")
    await output.wait_for(b"done5\r\n")
    await output.wait_for(PROMPT, 2)
    await process.write("echo loop-on; while :; do read -t 0.5 x && break; done; echo done05\n")
    await output.wait_for(b"loop-on\r\n")  # past readline: bash runs the loop now
    await assert_not_proof(process)
    await process.write("\n")
    await output.wait_for(b"done05\r\n")


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([sys.executable, "-q"], id="python3-q"),
        pytest.param([sys.executable, "-q", "-m", "asyncio"], id="python3-asyncio"),
        pytest.param(["node", "-i"], id="node-i"),
        pytest.param(["gdb", "-q"], id="gdb-q"),
        pytest.param(["gdb", "-q", "-i=mi2"], id="gdb-mi"),
    ],
)
async def test_repls_with_their_own_event_loops_stay_exact(spawn: Spawn, argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    process = await spawn(argv)
    Output(process)
    await eventually(lambda: _waiting(process), timeout=30)
    # Some thread (asyncio's REPL runs in one) reads the terminal in a wait that is proof.
    assert process.is_reading_terminal(process.pid)
    assert os.path.exists(f"/proc/{process.pid}")
