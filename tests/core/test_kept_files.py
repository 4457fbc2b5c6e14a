"""``/proc`` files kept open across looks: same answers as fresh reads, never another
process's, reopened after ``exec``, and closed with the terminal."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from pathlib import Path

import pytest

from dsh_terminal_core.provider.procfiles import KeptFiles, ProcessFiles
from dsh_terminal_core.provider.taskfacts import run_stamp, wake_count
from dsh_terminal_core.provider.terminal import _may_keep_files

from ..helpers import Output, Spawn

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")

BASH = ["/bin/bash", "--noprofile", "--norc", "-i"]
PROMPT = b"ps1> "
SPAWN_ENV = {"PS1": PROMPT.decode(), "TERM": "dumb"}


def _open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def _open_fds_with_spawning_ready(spawn: Spawn) -> set[str]:
    """This process's descriptors once spawning has started: the first spawn in a process
    starts the fork server, whose descriptors stay open for the process's life."""
    warm = await spawn(["/bin/true"])
    await warm.done
    await warm.terminate()
    return _open_fds()


def _targets(fds: set[str]) -> list[str]:
    targets = []
    for name in fds:
        # The descriptor that listed the directory is gone again.
        with contextlib.suppress(OSError):
            targets.append(os.readlink(f"/proc/self/fd/{name}"))
    return targets


def _stack_address(kept: KeptFiles) -> int:
    line = kept.read("syscall")
    assert line is not None
    return int(line.split()[7], 16)


async def test_kept_reads_match_fresh_reads_of_a_blocked_shell(spawn: Spawn) -> None:
    process = await spawn(BASH)
    await Output(process).wait_count(PROMPT, 1)
    kept = KeptFiles(process.pid)
    try:
        assert (await _settled(kept)) is not None
        base = Path(f"/proc/{process.pid}/task/{process.pid}")
        for _ in range(20):  # the shell sleeps at its prompt: every read is the same
            assert kept.read("schedstat") == (base / "schedstat").read_bytes()
            assert kept.read("syscall") == (base / "syscall").read_bytes()
        assert run_stamp(process.pid, kept) == run_stamp(process.pid)
        assert wake_count(process.pid, kept) == wake_count(process.pid)
        address = _stack_address(kept)
        with ProcessFiles(process.pid) as fresh, ProcessFiles(process.pid, kept=kept) as held:
            assert held.kept is kept
            assert held.memory(address, 64) == fresh.memory(address, 64)
    finally:
        kept.close()


async def test_kept_memory_is_reopened_after_exec(spawn: Spawn) -> None:
    process = await spawn(BASH)
    output = Output(process)
    await output.wait_count(PROMPT, 1)
    kept = KeptFiles(process.pid)
    try:
        assert (await _settled(kept)) is not None
        assert kept.memory(_stack_address(kept), 8) is not None
        # Same pid, new program and new memory: the old mem file reads nothing.
        await process.write("exec /bin/bash --noprofile --norc -i\n")
        await output.wait_count(PROMPT, 2)
        assert (await _settled(kept)) is not None
        assert kept.memory(_stack_address(kept), 8) is not None
    finally:
        kept.close()


async def _settled(kept: KeptFiles) -> bytes | None:
    """The syscall line once the shell sits in its read (it prints the prompt first)."""
    for _ in range(500):
        line = kept.read("syscall")
        if line is not None and len(line.split()) == 9:
            return line
        await asyncio.sleep(0.01)
    return None


async def test_kept_files_fail_once_the_process_is_gone_and_close_cleanly(
    spawn: Spawn,
) -> None:
    before = await _open_fds_with_spawning_ready(spawn)
    process = await spawn([sys.executable, "-c", "import sys; sys.stdin.readline()"])
    kept = KeptFiles(process.pid)
    assert kept.read("schedstat") is not None
    await process.write("bye\n")
    await process.done
    await process.terminate()
    # The task is gone: its kept files answer None, never another process's data.
    assert kept.read("schedstat") is None
    assert kept.read("syscall") is None
    kept.close()
    assert kept.read("schedstat") is None
    assert _open_fds() <= before


async def test_the_terminal_closes_the_shell_files_it_kept(spawn: Spawn) -> None:
    before = await _open_fds_with_spawning_ready(spawn)
    process = await spawn(BASH)
    await Output(process).wait_count(PROMPT, 1)
    process.set_shell_process_group(process.pid)
    for _ in range(500):  # opens the kept files, until the shell sits in its read
        if process.reader_wait(process.pid) is not None:
            break
        await asyncio.sleep(0.01)
    assert process.reader_wait(process.pid) is not None
    assert process.run_stamp(process.pid) is not None
    kept = {
        target for target in _targets(_open_fds() - before) if f"/proc/{process.pid}/" in target
    }
    assert len(kept) == (3 if _may_keep_files() else 0), kept
    await process.terminate()
    assert _open_fds() <= before
