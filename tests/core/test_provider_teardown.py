"""Full-tree teardown on real PTYs: stubborn descendants, forks during TERM, leaks."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from dsh_terminal_core.provider import (
    LocalTerminalProvider,
    TerminalSpawnSpec,
    kill_all_sync,
)

from ..helpers import Output, Spawn, own_descendants

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")

BASH = ["/bin/bash", "--noprofile", "--norc", "-i"]
PROMPT = b"ps1> "
SPAWN_ENV = {"PS1": PROMPT.decode(), "TERM": "dumb"}


def session_members(sid: int) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def until(predicate: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.01)


async def test_idle_shell_terminates_without_waiting_the_grace(spawn: Spawn) -> None:
    process = await spawn(BASH, grace_ms=3000)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    started = time.monotonic()
    await process.terminate()
    assert time.monotonic() - started < 1.0
    assert process.done.done()
    await process.terminate()  # idempotent


async def test_term_ignoring_background_grandchild_is_killed(spawn: Spawn) -> None:
    process = await spawn(BASH, grace_ms=300)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("bash -c 'trap \"\" TERM HUP; sleep 1000; :' &\n")
    await output.wait_count(PROMPT, 2)
    await until(lambda: any(p.name() == "sleep" for p in session_members(process.pid)))
    tree = psutil.Process(process.pid).children(recursive=True)
    assert len(tree) >= 2
    started = time.monotonic()
    await process.terminate()
    took = time.monotonic() - started
    assert 0.3 <= took < 3.0, "TERM is ignored: teardown must wait the grace, then KILL"
    assert all(gone(p) for p in tree)


async def test_nested_interactive_shell_ends_without_waiting_the_grace(spawn: Spawn) -> None:
    # An interactive bash ignores SIGTERM; as under a sandbox wrapper, the shell the
    # user sees is a descendant of the PTY child, so the tree phase must hang it up.
    process = await spawn(BASH, grace_ms=3000)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("exec 2>&1; bash --noprofile --norc -i\n")
    await output.wait_count(PROMPT, 2)
    tree = psutil.Process(process.pid).children(recursive=True)
    assert [p.name() for p in tree] == ["bash"]
    started = time.monotonic()
    await process.terminate()
    assert time.monotonic() - started < 1.0
    assert all(gone(p) for p in tree)


async def test_double_forked_session_member_is_killed(spawn: Spawn) -> None:
    # The subshell exits at once: sleep is no descendant, only a session member.
    process = await spawn(BASH, grace_ms=300)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("( trap '' TERM; exec sleep 1001 ) &\n")
    await output.wait_count(PROMPT, 2)
    await until(lambda: any(p.name() == "sleep" for p in session_members(process.pid)))
    members = [p for p in session_members(process.pid) if p.pid != process.pid]
    await process.terminate()
    assert members and all(gone(p) for p in members)


async def test_child_forked_while_handling_term_is_swept(spawn: Spawn, tmp_path: Path) -> None:
    record = tmp_path / "helper.pid"
    script = f"""
import os, signal, time
def on_term(*_):
    helper = os.fork()
    if helper == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        time.sleep(1000)
        os._exit(0)
    with open({str(record)!r}, "w") as handle:
        handle.write(str(helper))
    os._exit(0)
signal.signal(signal.SIGTERM, on_term)
print("armed", flush=True)
time.sleep(1000)
"""
    shell = await spawn(BASH, grace_ms=2000)
    output = Output(shell)
    await output.wait_count(PROMPT, 1)
    script_path = tmp_path / "forker.py"
    script_path.write_text(script)
    await shell.write(f"{sys.executable} {script_path} &\n")
    await output.wait_count(b"armed", 1)
    await shell.terminate()
    # The forker writes the helper's pid before it exits, and teardown waits for it.
    helper_pid = int(record.read_text())
    try:
        helper = psutil.Process(helper_pid)
    except psutil.NoSuchProcess:
        return
    assert gone(helper), "the helper forked during SIGTERM survived teardown"


async def test_orphan_left_by_a_shell_that_exited_is_killed(spawn: Spawn) -> None:
    process = await spawn(BASH, grace_ms=300)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("sleep 1002 &\n")
    await output.wait_count(PROMPT, 2)
    await until(lambda: any(p.name() == "sleep" for p in session_members(process.pid)))
    orphans = [p for p in session_members(process.pid) if p.name() == "sleep"]
    await process.write("exit\n")
    status = await asyncio.wait_for(asyncio.shield(process.done), 10)
    assert status.exit_code == 0
    assert not any(gone(p) for p in orphans)  # bash left it running
    await process.terminate()
    assert all(gone(p) for p in orphans)


async def test_host_exit_hook_kills_synchronously(spawn: Spawn) -> None:
    process = await spawn(BASH, grace_ms=300)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    await process.write("bash -c 'trap \"\" TERM HUP; sleep 1003; :' &\n")
    await output.wait_count(PROMPT, 2)
    await until(lambda: any(p.name() == "sleep" for p in session_members(process.pid)))
    tree = psutil.Process(process.pid).children(recursive=True)
    assert kill_all_sync() >= 1
    status = await asyncio.wait_for(asyncio.shield(process.done), 5)
    assert status.signal == "SIGKILL"
    await until(lambda: all(gone(p) for p in tree), timeout=5)
    await process.terminate()


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _children() -> list[psutil.Process]:
    return own_descendants()


async def test_spawn_terminate_cycles_leak_nothing() -> None:
    provider = LocalTerminalProvider()
    fds, children = _fd_count(), {p.pid for p in _children()}
    started = time.monotonic()
    for _ in range(200):
        process = await provider.spawn_terminal(
            TerminalSpawnSpec(argv=BASH, env={"PS1": "$ "}, grace_ms=3000)
        )
        try:
            process.set_output_handler(lambda chunk: None)
        finally:
            await process.terminate()
    elapsed = time.monotonic() - started
    assert _fd_count() == fds
    leftovers = [p for p in _children() if p.pid not in children]
    assert leftovers == [], f"left behind (zombies included): {leftovers}"
    assert elapsed < 20, f"200 cycles took {elapsed:.1f}s"
