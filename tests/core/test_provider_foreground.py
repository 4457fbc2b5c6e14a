"""Foreground inspection, the exact stdin-wait probe and signalling, on real PTYs."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import Callable

import psutil
import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.provider import (
    Foreground,
)

from ..helpers import Output, Spawn, until_true

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

BASH = ["/bin/bash", "--noprofile", "--norc", "-i"]
PROMPT = b"ps1> "
SPAWN_ENV = {"PS1": PROMPT.decode(), "TERM": "dumb"}


async def eventually(
    look: Callable[[], Foreground | None], want: Callable[[Foreground], bool], timeout: float = 10
) -> Foreground:
    """Look until ``want`` holds; programs like gdb need a moment to reach their read."""
    deadline = time.monotonic() + timeout
    while True:
        seen = look()
        if seen is not None and want(seen):
            return seen
        assert time.monotonic() < deadline, f"never satisfied; last look: {seen}"
        await asyncio.sleep(0.01)


def _runs(foreground: Foreground, name: str) -> bool:
    try:
        return bool(psutil.Process(foreground.process_group_id).name() == name)
    except psutil.Error:
        return False


async def test_foreground_group_follows_a_running_command(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    idle = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    assert idle.process_group_id == process.pid
    assert process.is_reading_terminal(process.pid)

    await process.write("sleep 100\n")
    # The group changes at fork; the name changes at exec, a moment later.
    busy = await eventually(process.inspect_foreground, lambda f: _runs(f, "sleep"))
    assert busy.process_group_id != process.pid
    assert not busy.input_waiting
    assert process.foreground_pgid() == busy.process_group_id
    assert not process.is_reading_terminal(process.pid)  # bash waits for sleep, not input


async def test_sigint_ends_a_foreground_sleep(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("sleep 100\n")
    busy = await eventually(process.inspect_foreground, lambda f: _runs(f, "sleep"))
    sleeper = psutil.Process(busy.process_group_id)
    assert process.signal_foreground("SIGINT") == busy.process_group_id
    await output.wait_count(PROMPT, 2)
    assert not sleeper.is_running()  # bash reaped it before printing the prompt
    assert process.foreground_pgid() == process.pid


async def test_sigkill_of_the_shell_is_refused(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    with pytest.raises(TerminalError) as caught:
        process.signal_foreground("SIGKILL")
    assert caught.value.code == "INVALID_ARGUMENT"
    assert str(caught.value) == (
        "refusing to SIGKILL the terminal shell; close the session instead"
    )
    assert not process.done.done()

    # A learned shell group is protected the same way; a foreground job is not.
    process.set_shell_process_group(process.pid)
    await process.write("sleep 100\n")
    busy = await eventually(process.inspect_foreground, lambda f: f.process_group_id != process.pid)
    assert process.signal_foreground("SIGKILL") == busy.process_group_id
    await output.wait_count(PROMPT, 2)


@pytest.mark.parametrize("sig", ["SIGUSR1", "SIGSTOP", "9", "sigint", ""])
async def test_unknown_signals_are_rejected(spawn: Spawn, sig: str) -> None:
    process = await spawn(["sleep", "100"])
    with pytest.raises(TerminalError) as caught:
        process.signal_foreground(sig)
    assert caught.value.code == "INVALID_ARGUMENT"


async def test_no_foreground_after_exit(spawn: Spawn) -> None:
    process = await spawn(["true"])
    await asyncio.wait_for(asyncio.shield(process.done), 10)
    assert process.inspect_foreground() is None
    with pytest.raises(TerminalError) as caught:
        process.signal_foreground("SIGINT")
    assert caught.value.code == "NO_FOREGROUND"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param([sys.executable, "-i", "-q"], id="python3-i-pselect6"),
        pytest.param(["cat"], id="cat-read"),
        pytest.param(["gdb", "-q", "-i=mi2"], id="gdb-mi-poll"),
        pytest.param(["node", "-i"], id="node-epoll"),
        pytest.param(BASH, id="bash-pselect6"),
    ],
)
async def test_programs_waiting_for_input_are_seen(spawn: Spawn, argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        pytest.skip(f"{argv[0]} is not installed")
    process = await spawn(argv)
    Output(process)
    seen = await eventually(process.inspect_foreground, lambda f: f.input_waiting, timeout=20)
    assert seen.process_group_id == process.pid
    assert not seen.input_hidden
    assert process.is_reading_terminal(process.pid)


async def test_password_prompt_on_dev_tty_is_seen_as_hidden_input(spawn: Spawn) -> None:
    # getpass opens /dev/tty and reads fd 3 with echo off: not fd 0.
    script = "import getpass; getpass.getpass('secret: ')"
    process = await spawn([sys.executable, "-c", script])
    output = Output(process)
    await output.wait_count(b"secret: ", 1)
    seen = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    assert not seen.echo
    assert seen.canonical
    assert seen.input_hidden


async def test_sleep_is_not_waiting_for_input(spawn: Spawn) -> None:
    process = await spawn(["sleep", "100"])
    await eventually(
        lambda: process.inspect_foreground(),
        lambda f: psutil.Process(process.pid).status() == psutil.STATUS_SLEEPING,
    )
    await asyncio.sleep(0.05)
    seen = process.inspect_foreground()
    assert seen is not None
    assert seen.process_group_id == process.pid
    assert not seen.input_waiting
    assert not process.is_reading_terminal(process.pid)


async def test_wake_count_moves_when_the_reader_wakes(spawn: Spawn) -> None:
    process = await spawn(["cat"])
    output = Output(process)
    before = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    await process.write("ping\n")
    await output.wait_count(b"ping", 2)  # the echo and cat's copy
    after = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    assert after.process_group_id == before.process_group_id
    assert after.wake_count != before.wake_count


async def test_run_stamp_holds_while_a_reader_sleeps_and_moves_when_it_runs(
    spawn: Spawn,
) -> None:
    process = await spawn(["cat"])
    output = Output(process)
    waiting = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    pid = waiting.process_group_id
    stamp = process.run_stamp(pid)
    assert stamp is not None
    for _ in range(50):  # a blocked reader does not run, however often it is looked at
        assert process.run_stamp(pid) == stamp
        assert process.ran_since(pid, stamp) is False
        await asyncio.sleep(0.001)
    assert process.terminal_modes() is not None
    await process.write("ping\n")
    await output.wait_count(b"ping", 2)
    assert process.run_stamp(pid) != stamp
    assert process.ran_since(pid, stamp) is True


async def test_a_reader_that_started_a_thread_has_run_since_its_stamp(spawn: Spawn) -> None:
    """``ran_since`` counts no threads: making one is running, which moves the stamp."""
    script = (
        "import sys, threading; sys.stdin.readline(); "
        "threading.Thread(target=sys.stdin.readline).start(); sys.stdin.readline()"
    )
    process = await spawn([sys.executable, "-c", script])
    waiting = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    pid = waiting.process_group_id
    stamp = process.run_stamp(pid)
    assert stamp is not None
    await process.write("go\n")
    assert await until_true(lambda: process.run_stamp(pid) is None)  # two threads now
    assert process.ran_since(pid, stamp) is True


async def test_a_process_gone_counts_as_having_run(spawn: Spawn) -> None:
    process = await spawn(["cat"])
    waiting = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    pid = waiting.process_group_id
    stamp = process.run_stamp(pid)
    assert stamp is not None
    await process.write("\x04")  # end of input: cat exits
    await process.done
    assert process.ran_since(pid, stamp) is True


async def test_run_stamp_is_unknown_for_a_threaded_process(spawn: Spawn) -> None:
    script = "import threading, sys; threading.Thread(target=sys.stdin.readline).start()"
    process = await spawn([sys.executable, "-c", script + "; sys.stdin.readline()"])
    await eventually(process.inspect_foreground, lambda f: f.input_waiting)
    assert process.run_stamp(process.pid) is None


async def test_sole_member_tells_a_lone_reader_from_a_pipeline(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    # The shell at its prompt leads a group of one.
    assert process.sole_member(process.pid)

    await process.write("cat\n")
    alone = await eventually(process.inspect_foreground, lambda f: _runs(f, "cat"))
    assert process.sole_member(alone.process_group_id)
    process.signal_foreground("SIGINT")
    await output.wait_count(PROMPT, 2)

    # A reader followed by a stage that still writes: the group is not its leader alone.
    await process.write("cat | cat\n")
    piped = await eventually(
        process.inspect_foreground, lambda f: f.input_waiting and _runs(f, "cat")
    )
    assert not process.sole_member(piped.process_group_id)
    process.signal_foreground("SIGINT")
    await output.wait_count(PROMPT, 3)

    # A reader with a child of its own (which may write) is not alone either.
    await process.write("sh -c 'sleep 100 & read x'\n")
    # The shell itself reads too until it has taken the line: wait for the new group.
    parent = await eventually(
        process.inspect_foreground,
        lambda f: f.input_waiting and f.process_group_id != process.pid,
    )
    assert not process.sole_member(parent.process_group_id)
    process.signal_foreground("SIGKILL", parent.process_group_id)
    await output.wait_count(PROMPT, 4)


async def test_sole_member_is_false_for_a_group_that_is_gone(spawn: Spawn) -> None:
    process = await spawn(["/bin/true"])
    await process.done
    assert not process.sole_member(process.pid)


async def test_group_look_scans_processes_only_for_a_group_with_other_members(
    spawn: Spawn,
) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    probe = process._probe
    scans = 0
    members = probe._members  # type: ignore[attr-defined]

    def counted(pgid: int) -> object:
        nonlocal scans
        scans += 1
        return members(pgid)

    probe._members = counted  # type: ignore[attr-defined]
    # A lone command that does not read: no member to look for, no scan.
    await process.write("sleep 100\n")
    await eventually(process.inspect_foreground, lambda f: _runs(f, "sleep"))
    scans = 0  # (between fork and exec the group may still be forming)
    for _ in range(20):
        busy = process.inspect_foreground()
        assert busy is not None and not busy.input_waiting
    assert scans == 0
    process.signal_foreground("SIGINT")
    await output.wait_count(PROMPT, 2)
    # The leader waits for its child, and the child reads the terminal: found by a scan.
    await process.write("sh -c 'cat; true'\n")
    await eventually(
        process.inspect_foreground,
        lambda f: f.input_waiting and f.process_group_id != process.pid,
    )
    assert scans > 0
    process.signal_foreground("SIGINT")
    await output.wait_count(PROMPT, 3)


async def test_terminal_modes_follow_the_programs_settings(spawn: Spawn) -> None:
    # The program turns echo and line mode off and on; each state is read back exactly.
    script = (
        "import sys, termios\n"
        "fd = sys.stdin.fileno()\n"
        "for echo, canon in ((0, 0), (1, 0), (0, 1), (1, 1)):\n"
        "    a = termios.tcgetattr(fd)\n"
        "    a[3] = (a[3] | termios.ECHO) if echo else (a[3] & ~termios.ECHO)\n"
        "    a[3] = (a[3] | termios.ICANON) if canon else (a[3] & ~termios.ICANON)\n"
        "    termios.tcsetattr(fd, termios.TCSANOW, a)\n"
        "    print(f'state {echo}{canon}', flush=True)\n"
        "    sys.stdin.readline() if canon else sys.stdin.read(1)\n"
    )
    process = await spawn([sys.executable, "-c", script])
    output = Output(process)
    for echo, canonical in ((False, False), (True, False), (False, True), (True, True)):
        await output.wait_for(f"state {int(echo)}{int(canonical)}".encode())
        assert process.terminal_modes() == (echo, canonical)
        seen = await eventually(process.inspect_foreground, lambda f: f.input_waiting)
        assert (seen.echo, seen.canonical) == (echo, canonical)
        await process.write("x\n" if canonical else "x")  # what that state reads, no more
