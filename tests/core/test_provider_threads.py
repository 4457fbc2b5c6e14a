"""A threaded program is waiting for keys only if every thread is (SPEC §28.1), on real
processes.

The main thread of ``threaded_reader.py`` is blocked reading the terminal in each case;
what decides is the second thread: asleep on a queue (proof), spinning on the CPU, or
waking every 200 ms from a timed wait (neither). Each negative case first checks that
the main thread really is in its read, so "not proof" never means "not looked".

A shell backend may declare the timed waits its helper threads are known to leave
quietly (:class:`~dsh_terminal_core.provider.QuietHelpers`, fish's idle pool workers):
the timed wait then counts as asleep, for the shell's executable only, once the shell's
group is known; a thread at work never does.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from dsh_terminal_core.provider import Foreground, LocalTerminalProcess, QuietHelpers
from dsh_terminal_core.provider.syscalls import Wait, current_table

from ..helpers import Output, Spawn, eventually

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

READER = str(Path(__file__).parents[1] / "fixtures" / "threaded_reader.py")
LOOKS = 20


def _waiting(process: LocalTerminalProcess) -> bool:
    seen: Foreground | None = process.inspect_foreground()
    return seen is not None and seen.input_waiting


def _main_thread_reading(pid: int) -> bool:
    table = current_table()
    assert table is not None
    try:
        with open(f"/proc/{pid}/task/{pid}/syscall") as handle:
            number = handle.read().split()[0]
    except (OSError, IndexError):
        return False
    call = table.waits.get(int(number)) if number.isdigit() else None
    return call is not None and call.kind is Wait.READ


# The fixture's timed thread waits 200 ms at a time.
DECLARED = QuietHelpers(futex_ns=250_000_000)


async def _reader(
    spawn: Spawn, mode: str, quiet: QuietHelpers | None = None
) -> tuple[LocalTerminalProcess, Output]:
    process = await spawn([sys.executable, READER, mode], quiet_helpers=quiet)
    output = Output(process)
    await output.wait_for(f"ready {mode}".encode())
    return process, output


async def test_a_second_thread_asleep_on_a_queue_keeps_the_wait_exact(spawn: Spawn) -> None:
    process, output = await _reader(spawn, "idle")
    await eventually(lambda: _waiting(process))
    assert process.is_reading_terminal(process.pid)
    await process.write("hello\n")
    await output.wait_for(b"typed hello")
    await eventually(lambda: _waiting(process))


@pytest.mark.parametrize("mode", ["busy", "timed"])
async def test_a_second_thread_at_work_or_waking_soon_is_not_proof(spawn: Spawn, mode: str) -> None:
    process, _ = await _reader(spawn, mode)
    for _ in range(LOOKS):
        await eventually(lambda: _main_thread_reading(process.pid))
        seen = process.inspect_foreground()
        assert seen is not None and not seen.input_waiting, seen
        assert seen.polling is None, seen
        assert not process.is_reading_terminal(process.pid)
        await asyncio.sleep(0.01)


async def test_a_declared_helper_wait_keeps_the_wait_exact(spawn: Spawn) -> None:
    process, output = await _reader(spawn, "timed", DECLARED)
    # Declared for the shell's executable: nothing counts until the group is known.
    for _ in range(LOOKS // 4):
        await eventually(lambda: _main_thread_reading(process.pid))
        assert not _waiting(process)
        await asyncio.sleep(0.01)
    process.set_shell_process_group(process.pid)
    for _ in range(LOOKS):
        await eventually(lambda: _waiting(process))
        assert process.reader_wait(process.pid) is not None
        await asyncio.sleep(0.01)
    await process.write("hello\n")
    await output.wait_for(b"typed hello")
    await eventually(lambda: _waiting(process))


async def test_a_helper_at_work_is_not_proof_whatever_is_declared(spawn: Spawn) -> None:
    process, _ = await _reader(spawn, "busy", QuietHelpers(futex_ns=250_000_000, own_poll_ns=1))
    process.set_shell_process_group(process.pid)
    for _ in range(LOOKS):
        await eventually(lambda: _main_thread_reading(process.pid))
        assert not _waiting(process)
        assert process.reader_wait(process.pid) is None
        await asyncio.sleep(0.01)


async def test_a_helper_wait_of_an_undeclared_kind_is_not_proof(spawn: Spawn) -> None:
    # A short poll off the terminal is declared; the thread sleeps in a timed futex.
    process, _ = await _reader(spawn, "timed", QuietHelpers(own_poll_ns=250_000_000))
    process.set_shell_process_group(process.pid)
    for _ in range(LOOKS):
        await eventually(lambda: _main_thread_reading(process.pid))
        assert not _waiting(process)
        await asyncio.sleep(0.01)
