"""The terminal's input side: counted through a peer kept open while the program runs,
released when it exits so the master still reaches EOF once every holder is gone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys

import pytest

from dsh_terminal_core.provider.peer import TerminalInput
from dsh_terminal_core.provider.terminal import _may_keep_files

from ..helpers import Output, Spawn, until_true

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="TIOCGPTPEER")

# Reads a line, says so, then reads one more line and exits.
READER = [
    sys.executable,
    "-c",
    "import sys; sys.stdin.readline(); print('ready', flush=True); sys.stdin.readline()",
]
# Reads a line, says so, then sleeps while typed input piles up unread.
SLEEPER = [
    sys.executable,
    "-c",
    "import sys, time; sys.stdin.readline(); print('ready', flush=True); time.sleep(60)",
]


def _own_slave_fds(terminal: str) -> list[int]:
    """This process's descriptors open on the terminal's slave ``terminal``."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}") == terminal:
                found.append(int(name))
    return found


async def test_unread_input_is_counted_through_a_kept_peer_and_flushed(spawn: Spawn) -> None:
    process = await spawn(SLEEPER)
    output = Output(process)
    await process.write("first\n")
    await output.wait_for(b"ready")
    terminal = process.terminal_path
    assert terminal is not None
    for round_ in range(20):
        line = f"typed-{round_}\n"
        await process.write(line)
        # Counted right after the write, bytes still in the kernel's hand-over included.
        assert process.unread_input() == len(line), round_
        assert process.flush_input() is True
        assert process.unread_input() == 0, round_
    assert len(_own_slave_fds(terminal)) == (1 if _may_keep_files() else 0)


async def test_the_kept_peer_is_released_at_exit_so_the_master_reaches_eof(
    spawn: Spawn,
) -> None:
    process = await spawn(READER)
    output = Output(process)
    terminal = process.terminal_path
    assert terminal is not None
    assert process.unread_input() == 0  # opens the kept peer where files may be kept
    await process.write("first\nsecond\n")
    await output.wait_for(b"ready")
    await process.done
    assert _own_slave_fds(terminal) == []
    # Nothing else holds the slave: the master reports EOF, as without the peer.
    assert await until_true(lambda: process._channel.eof)  # type: ignore[attr-defined]
    # Asked after the exit, the count comes from a peer opened for that moment only.
    assert process.unread_input() in (0, None)
    assert _own_slave_fds(terminal) == []


async def test_a_kept_peer_gone_bad_is_replaced_by_a_fresh_one() -> None:
    master, slave = os.openpty()
    side = TerminalInput(master, keep=True)
    try:
        os.write(master, b"abc\n")
        assert side.unread() == 4
        assert side.flush() is True
        assert side.unread() == 0
        kept = side._peer  # type: ignore[attr-defined]
        assert kept is not None
        # The kept descriptor now names something that is no terminal.
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, kept)
        os.close(null)
        os.write(master, b"de\n")
        # The queue was empty, so the fresh peer's poll takes in the bytes in flight.
        assert side.unread() == 3
        assert side._peer is not None  # type: ignore[attr-defined]
        assert os.readlink(f"/proc/self/fd/{side._peer}") == os.ttyname(slave)  # type: ignore[attr-defined]
        assert side.flush() is True
        assert side.unread() == 0
        side.release()
        assert side._peer is None  # type: ignore[attr-defined]
        assert side.unread() == 0  # answered through a peer opened for the moment
    finally:
        side.release()
        os.close(master)
        os.close(slave)


async def test_a_count_with_input_already_waiting_is_never_zero() -> None:
    """With a line already queued the poll does not take in bytes still in flight, so
    the count may stop short of them; it never says 0 while input waits."""
    for _round in range(200):
        master, slave = os.openpty()
        side = TerminalInput(master, keep=True)
        try:
            os.write(master, b"abc\n")
            assert side.unread() == 4
            os.write(master, b"de\n")
            assert side.unread() in (4, 7)
            assert side.flush() is True
            os.write(master, b"fg\n")
            assert side.unread() == 3
        finally:
            side.release()
            os.close(master)
            os.close(slave)


async def test_without_keeping_no_peer_outlives_an_operation() -> None:
    master, slave = os.openpty()
    terminal = os.ttyname(slave)
    try:
        side = TerminalInput(master, keep=False)
        os.write(master, b"xyz\n")
        assert side.unread() == 4
        assert _own_slave_fds(terminal) == [slave]
        assert side.flush() is True
        assert side.unread() == 0
        assert _own_slave_fds(terminal) == [slave]
    finally:
        os.close(master)
        os.close(slave)
    await asyncio.sleep(0)
