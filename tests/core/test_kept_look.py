"""The shell's prompt look, specialised for kept files, answers as the general look does.

The specialised look decides only the waits a shell at its prompt makes (``read`` on the
terminal, ``select`` on the terminal alone with no timeout) and hands everything else to
the general look. On real processes, blocked in each kind of wait, both looks must give
the same answer; the specialised one must decide the shell's prompt and ``cat`` itself
(else it would never be used), and must hand over every wait it cannot prove.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from dsh_terminal_core.provider import LocalTerminalProcess
from dsh_terminal_core.provider.inspector import ReaderWait, TerminalIdentity
from dsh_terminal_core.provider.inspector_linux import GENERAL as _GENERAL, LinuxStdinProbe
from dsh_terminal_core.provider.procfiles import KeptFiles

from ..helpers import Output, Spawn, eventually

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

WAITER = str(Path(__file__).parents[1] / "fixtures" / "waiter.py")
BASH = ["/bin/bash", "--noprofile", "--norc", "-i"]
PROMPT = b"ps1> "
SPAWN_ENV = {"PS1": PROMPT.decode(), "TERM": "dumb"}


def _blocked(pid: int) -> bool:
    """The main thread sits in a system call (not running)."""
    try:
        with open(f"/proc/{pid}/syscall") as handle:
            return handle.read().split()[0] not in ("running", "-1")
    except (OSError, IndexError):
        return False


def _terminal(process: LocalTerminalProcess) -> TerminalIdentity:
    terminal = process._terminal  # the identity the process's own looks use
    assert terminal is not None
    return terminal


def _answer(seen: ReaderWait | None) -> tuple[bool, int | None, bytes | None]:
    if seen is None:
        return (False, None, None)
    return (True, seen.wakes, seen.stamp)


async def _both_looks(pid: int, terminal: TerminalIdentity) -> tuple[object, ReaderWait | None]:
    """The specialised and the general answer for ``pid`` in one and the same wait.

    The process may run between the two looks (a timeout, a child's write): then the
    pair is taken again, so a difference is never the process's, always the looks'.
    """
    probe = LinuxStdinProbe()
    kept = KeptFiles(pid)
    try:
        for _ in range(50):
            await eventually(lambda: _blocked(pid))
            stamp = kept.read("schedstat")
            special = probe._kept_reader_wait(kept, terminal)
            general = probe.reader_wait(pid, terminal)  # no kept files: the general look
            if kept.read("schedstat") == stamp:
                return special, general
            await asyncio.sleep(0.01)
        raise AssertionError("the process never held still for two looks")
    finally:
        kept.close()


async def _assert_agree(pid: int, terminal: TerminalIdentity, *, decides: bool) -> bool:
    """Both looks agree; the specialised one decided (or handed over) as expected.
    Returns whether the wait is proof."""
    special, general = await _both_looks(pid, terminal)
    if decides:
        assert special is not _GENERAL
        assert _answer(special) == _answer(general)  # type: ignore[arg-type]
    else:
        assert special is _GENERAL
    return general is not None


async def test_the_shell_at_its_prompt_is_decided_by_the_specialised_look(spawn: Spawn) -> None:
    process = await spawn(BASH)
    await Output(process).wait_count(PROMPT, 1)
    await eventually(lambda: process.is_reading_terminal(process.pid))
    assert await _assert_agree(process.pid, _terminal(process), decides=True)


async def test_a_read_of_the_terminal_is_decided_by_the_specialised_look(spawn: Spawn) -> None:
    process = await spawn(["cat"])
    await eventually(lambda: process.is_reading_terminal(process.pid))
    assert await _assert_agree(process.pid, _terminal(process), decides=True)


async def test_a_shell_running_a_command_is_not_reading(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("sleep 30\n")
    await output.wait_for(b"sleep 30\r\n")
    await eventually(lambda: not process.is_reading_terminal(process.pid))
    assert not await _assert_agree(process.pid, _terminal(process), decides=True)


async def test_a_select_with_a_timeout_goes_to_the_general_look(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("read -t 20 x\n")  # pselect6 on the terminal, with a timeout
    await output.wait_for(b"read -t 20 x\r\n")
    await eventually(lambda: process.is_reading_terminal(process.pid))
    assert await _assert_agree(process.pid, _terminal(process), decides=False)


@pytest.mark.parametrize("millis", ["100", "3000"])
async def test_a_waiter_with_a_timeout_goes_to_the_general_look(spawn: Spawn, millis: str) -> None:
    process = await spawn([sys.executable, WAITER, "timeout", millis, "select"])
    await Output(process).wait_for(b"ready timeout")
    proof = await _assert_agree(process.pid, _terminal(process), decides=False)
    assert proof is (millis == "3000")  # a wait that ends within a second is no proof


@pytest.mark.parametrize("call", ["select", "poll", "epoll"])
async def test_a_wait_on_the_terminal_and_a_socket_is_never_proof(spawn: Spawn, call: str) -> None:
    process = await spawn([sys.executable, WAITER, "udp", "", call])
    await Output(process).wait_for(b"ready udp")
    special, general = await _both_looks(process.pid, _terminal(process))
    assert general is None
    assert special is _GENERAL  # the socket is not the terminal: the general look judges it


async def test_a_read_of_dev_tty_goes_to_the_general_look(spawn: Spawn) -> None:
    # getpass, sudo and ssh read /dev/tty on a descriptor of its own: the general look
    # resolves it through the controlling terminal.
    script = (
        "import sys; sys.stdout.write('ready\\n'); sys.stdout.flush(); open('/dev/tty').readline()"
    )
    process = await spawn([sys.executable, "-c", script])
    await Output(process).wait_for(b"ready")
    await eventually(lambda: process.is_reading_terminal(process.pid))
    assert await _assert_agree(process.pid, _terminal(process), decides=False)
