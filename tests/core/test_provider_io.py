"""Byte transport of the local provider: output, exit status, writes, spawn failures."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from dsh_terminal_core.kernel.errors import TerminalError, UnsupportedPlatform
from dsh_terminal_core.provider import (
    LocalTerminalProvider,
    TerminalProcess,
    TerminalSpawnSpec,
)

from ..helpers import Output, Spawn, own_descendants


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _live_children() -> set[int]:
    return {child.pid for child in own_descendants() if child.status() != psutil.STATUS_ZOMBIE}


async def test_exit_code_is_reported(spawn: Spawn) -> None:
    process = await spawn(["/bin/bash", "--noprofile", "--norc", "-c", "exit 3"])
    status = await asyncio.wait_for(process.done, 10)
    assert (status.exit_code, status.signal) == (3, None)


async def test_killing_signal_is_reported_by_name(spawn: Spawn) -> None:
    process = await spawn(["sleep", "100"])
    os.kill(process.pid, 9)
    status = await asyncio.wait_for(process.done, 10)
    assert (status.exit_code, status.signal) == (None, "SIGKILL")


async def test_output_before_the_handler_is_buffered(spawn: Spawn) -> None:
    process = await spawn(["printf", "early-bird"])
    await asyncio.wait_for(asyncio.shield(process.done), 10)
    output = Output(process)
    assert bytes(output.data) == b"early-bird"


async def test_all_output_is_delivered_before_done(spawn: Spawn) -> None:
    size = 1_000_000
    script = f"import sys; sys.stdout.buffer.write(b'x' * {size}); sys.stdout.flush()"
    process = await spawn([sys.executable, "-c", script])
    output = Output(process)
    seen_at_done: list[int] = []
    process.done.add_done_callback(lambda _: seen_at_done.append(len(output.data)))
    status = await asyncio.wait_for(process.done, 20)
    assert status.exit_code == 0
    assert seen_at_done == [size]


async def test_done_does_not_wait_for_a_descendant_holding_the_terminal(spawn: Spawn) -> None:
    # The background sleep keeps the slave open: the master never reports EOF.
    process = await spawn(["/bin/bash", "-c", "sleep 1000 & echo parent-done"])
    output = Output(process)
    status = await asyncio.wait_for(process.done, 10)
    assert status.exit_code == 0
    assert b"parent-done" in output.data
    await process.terminate()
    assert not _live_children()


async def test_large_write_waits_for_the_reader_without_blocking_the_loop(spawn: Spawn) -> None:
    # The child reads nothing for 0.3 s; 200 KB cannot fit in the PTY meanwhile.
    process = await spawn(["sh", "-c", "stty -echo; sleep 0.3; wc -c"])
    output = Output(process)
    await asyncio.sleep(0.05)  # let stty run before data arrives
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    line = b"y" * 99 + b"\n"
    payload = line * 2048  # 204,800 bytes
    started = time.monotonic()
    await process.write(payload)
    took = time.monotonic() - started
    stop.set()
    await ticking
    await process.write("\x04")
    await asyncio.wait_for(process.done, 10)
    assert output.data.strip().endswith(str(len(payload)).encode())
    assert took >= 0.2, "the write should have had to wait for the reader"
    assert max(gaps) < 0.1, f"the event loop stalled for {max(gaps):.3f}s"


async def test_cancelled_write_drops_its_remainder(spawn: Spawn) -> None:
    process = await spawn(["sh", "-c", "stty -echo; sleep 0.3; wc -c"])
    output = Output(process)
    await asyncio.sleep(0.05)
    payload = (b"z" * 99 + b"\n") * 2048
    writing = asyncio.create_task(process.write(payload))
    await asyncio.sleep(0.1)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    await process.write(b"\n\x04")  # the lock was released; later writes still work
    await asyncio.wait_for(process.done, 10)
    counted = int(output.data.split()[-1])
    assert 0 < counted < len(payload)


async def test_concurrent_writes_do_not_interleave(spawn: Spawn, tmp_path: Path) -> None:
    target = tmp_path / "received"
    process = await spawn(["sh", "-c", f"stty -echo; sleep 0.2; cat > {target}"])
    await asyncio.sleep(0.05)
    first = (b"a" * 63 + b"\n") * 800
    second = (b"b" * 63 + b"\n") * 800
    await asyncio.gather(process.write(first), process.write(second))
    await process.write(b"\x04")
    await asyncio.wait_for(process.done, 10)
    assert target.read_bytes() in (first + second, second + first)


async def test_write_after_terminate_fails_cleanly(spawn: Spawn) -> None:
    process = await spawn(["cat"])
    await process.terminate()
    with pytest.raises(TerminalError) as caught:
        await process.write("late\n")
    assert caught.value.code == "TERMINAL_CLOSED"


async def test_resize_reaches_the_child(spawn: Spawn) -> None:
    process = await spawn(
        ["/bin/bash", "--noprofile", "--norc", "-i"], env={"PS1": "ps1> "}, rows=30, cols=90
    )
    output = Output(process)
    await output.wait_for(b"ps1> ")
    await process.write("stty size\n")
    await output.wait_for(b"30 90")
    process.resize(50, 120)
    await process.write("stty size\n")
    await output.wait_for(b"50 120")
    with pytest.raises(TerminalError) as caught:
        process.resize(0, 10)
    assert caught.value.code == "INVALID_ARGUMENT"


@pytest.mark.parametrize(
    ("argv", "cwd", "fragment"),
    [
        (["definitely-not-a-command-xyz"], None, "definitely-not-a-command-xyz"),
        (["/no/such/dir/tool"], None, "/no/such/dir/tool"),
        (["true"], "/no/such/directory", "/no/such/directory"),
    ],
)
async def test_spawn_failure_raises_and_leaves_nothing(
    argv: list[str], cwd: str | None, fragment: str
) -> None:
    fds, children = _fd_count(), _live_children()
    with pytest.raises(TerminalError) as caught:
        await LocalTerminalProvider().spawn_terminal(TerminalSpawnSpec(argv=argv, cwd=cwd))
    assert caught.value.code == "SPAWN_FAILED"
    assert fragment in str(caught.value)
    assert _fd_count() == fds
    assert _live_children() == children


async def test_exec_failure_after_fork_leaves_nothing(tmp_path: Path) -> None:
    # Executable bit, but not a program: exec fails in the already-forked child.
    bogus = tmp_path / "not-a-program"
    bogus.write_bytes(b"\x00\x01\x02\x03 garbage")
    bogus.chmod(0o755)
    fds, children = _fd_count(), _live_children()
    before = {p.pid for p in psutil.Process().children()}
    with pytest.raises(TerminalError) as caught:
        await LocalTerminalProvider().spawn_terminal(TerminalSpawnSpec(argv=[str(bogus)]))
    assert caught.value.code == "SPAWN_FAILED"
    assert _fd_count() == fds
    assert _live_children() == children
    # Not even a zombie: the failed child was reaped.
    assert {p.pid for p in psutil.Process().children()} == before


async def test_pending_output_counts_what_the_handler_has_not_seen(spawn: Spawn) -> None:
    process = await spawn(["cat"])
    assert isinstance(process, TerminalProcess)
    output = Output(process)
    await process.write("marker\n")
    await output.wait_for(b"marker\r\nmarker\r\n")  # echo and cat's copy
    assert process.pending_output() == 0
    seen = len(output.data)
    await process.write("queued\n")
    # Hold the loop so the reader cannot run: the bytes wait on the master. A byte still
    # in the PTY's hand-over work is read by the count itself and handed to the handler
    # at once, so what the handler got meanwhile plus what is pending is all of it.
    deadline = time.monotonic() + 5
    while len(output.data) - seen + process.pending_output() < len(b"queued\r\nqueued\r\n"):
        assert time.monotonic() < deadline
        time.sleep(0.005)
    await output.wait_for(b"queued\r\nqueued\r\n")
    assert process.pending_output() == 0


async def test_exit_is_observed_without_pidfds(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, flags: int = 0) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(os, "pidfd_open", refuse)
    provider = LocalTerminalProvider()
    quick = await provider.spawn_terminal(TerminalSpawnSpec(argv=["sh", "-c", "echo hi; exit 7"]))
    output = Output(quick)
    try:
        status = await asyncio.wait_for(quick.done, 10)
        assert status.exit_code == 7
        assert b"hi" in output.data
    finally:
        await quick.terminate()
    lasting = await provider.spawn_terminal(
        TerminalSpawnSpec(argv=["/bin/bash", "--noprofile", "--norc", "-i"])
    )
    try:
        await lasting.terminate()
        assert lasting.done.result().signal in ("SIGHUP", "SIGTERM", "SIGKILL")
    finally:
        await lasting.terminate()


async def test_windows_is_refused_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(UnsupportedPlatform) as caught:
        await LocalTerminalProvider().spawn_terminal(TerminalSpawnSpec(argv=["cmd.exe"]))
    assert "Windows" in str(caught.value)
