"""The fork server: terminals start outside this process, and nothing about them changes.

What the shell sees (its session, controlling terminal, job control, cwd, env, window,
descriptors, signal dispositions), what the host gets back (exit status after reaping by
the server, no leaked descriptor), and how the server fails: killed → the next open
starts another; killed mid-request → the request is retried; a bad executable → a clear
error; a cancelled open → the server kills the child it could not hand over; a server
that cannot start → in-process spawning, said in the log; a dead host → a dead server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.provider import (
    LocalTerminalProcess,
    LocalTerminalProvider,
    TerminalSpawnSpec,
    forkclient,
)
from dsh_terminal_core.provider.forkclient import ForkServer, fork_server

from ..helpers import Output, Spawn, until_true

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the fork server is Linux-only"
)


def _server() -> psutil.Process:
    pid = fork_server().pid
    assert pid is not None, "the fork server is not running"
    return psutil.Process(pid)


# -- what the shell sees -------------------------------------------------------------------


async def test_the_shell_is_a_session_leader_on_its_terminal_started_by_the_server(
    spawn: Spawn,
) -> None:
    process = await spawn(["/bin/bash", "--noprofile", "--norc", "-i"], env={"PS1": "$ "})
    output = Output(process)
    await process.write("echo flags:$-:$(tty)\n")
    await output.wait_for(b"flags:")
    await output.wait_for(b"\n", timeout=10)
    server = _server()
    shell = psutil.Process(process.pid)
    assert shell.ppid() == server.pid
    assert os.getsid(process.pid) == process.pid
    assert process.foreground_pgid() == process.pid
    await output.wait_for(b"/dev/pts/")
    line = next(x for x in bytes(output.data).splitlines() if x.startswith(b"flags:"))
    flags, tty = line.decode().split(":")[1:3]
    assert "m" in flags, f"job control is off: $- is {flags!r}"
    assert tty == process.terminal_path


async def test_job_control_suspends_and_resumes_a_foreground_job(spawn: Spawn) -> None:
    process = await spawn(["/bin/bash", "--noprofile", "--norc", "-i"], env={"PS1": "$ "})
    output = Output(process)
    await process.write("sleep 30\n")
    await asyncio.wait_for(_wait_foreground_is(process, "sleep"), 10)
    process.signal_foreground("SIGTSTP")
    await output.wait_for(b"Stopped")
    await process.write("jobs -l; echo jobs-done\n")
    await output.wait_for(b"jobs-done\r\n")
    assert b"Stopped" in output.data and b"sleep 30" in output.data


async def _wait_foreground_is(process: LocalTerminalProcess, name: str) -> None:
    """Until the foreground group's leader has exec'd ``name`` (a stop signal that lands
    before, while the forked shell still ignores it, would be lost)."""
    while True:
        pgid = process.foreground_pgid()
        with contextlib.suppress(psutil.Error):
            if pgid is not None and psutil.Process(pgid).name() == name:
                return
        await asyncio.sleep(0.01)


async def test_cwd_env_and_window_size_reach_the_child(spawn: Spawn, tmp_path: Path) -> None:
    process = await spawn(
        ["sh", "-c", 'echo "cwd=$(pwd) var=$SPAWN_PROBE size=$(stty size)"'],
        cwd=str(tmp_path),
        env={"SPAWN_PROBE": "x y"},
        rows=33,
        cols=77,
    )
    output = Output(process)
    assert (await asyncio.wait_for(process.done, 10)).exit_code == 0
    assert f"cwd={tmp_path} var=x y size=33 77".encode() in output.data


async def test_no_cwd_means_this_process_current_directory_now(
    spawn: Spawn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await spawn(["true"])  # the server is running, started from another directory
    monkeypatch.chdir(tmp_path)
    process = await spawn(["pwd"])
    output = Output(process)
    await asyncio.wait_for(process.done, 10)
    assert bytes(output.data).strip() == str(tmp_path).encode()


async def test_no_descriptor_of_the_host_or_server_reaches_the_child(spawn: Spawn) -> None:
    script = (
        "import os\n"
        "for fd in sorted(os.listdir('/proc/self/fd'), key=int):\n"
        "    try:\n"
        "        print('fd', fd, os.readlink('/proc/self/fd/' + fd))\n"
        "    except OSError:\n"
        "        pass\n"
    )
    process = await spawn([sys.executable, "-I", "-c", script])
    output = Output(process)
    assert (await asyncio.wait_for(process.done, 10)).exit_code == 0
    lines = [x.split(b" ", 2) for x in bytes(output.data).splitlines() if x.startswith(b"fd ")]
    others = [
        (fd, target)
        for _, fd, target in lines
        if fd not in (b"0", b"1", b"2") and not target.startswith(b"/proc/")
    ]
    assert others == [], f"inherited descriptors: {others}"
    assert {fd for _, fd, target in lines if target.startswith(b"/dev/pts/")} == {
        b"0",
        b"1",
        b"2",
    }


async def test_the_child_gets_default_signal_dispositions(spawn: Spawn) -> None:
    # The spawned program reads its own status (a shell would report its own, changing,
    # mask while it waits for a child).
    process = await spawn(["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"])
    output = Output(process)
    await asyncio.wait_for(process.done, 10)
    text = bytes(output.data).decode()
    assert "SigIgn:\t0000000000000000" in text, text
    assert "SigBlk:\t0000000000000000" in text, text


# -- what the host gets back ---------------------------------------------------------------


async def test_exit_status_comes_back_from_the_server_after_the_output(spawn: Spawn) -> None:
    process = await spawn(["sh", "-c", "printf tail-bytes; exit 42"])
    output = Output(process)
    seen: list[bytes] = []
    process.done.add_done_callback(lambda _: seen.append(bytes(output.data)))
    status = await asyncio.wait_for(process.done, 10)
    assert (status.exit_code, status.signal) == (42, None)
    assert seen == [b"tail-bytes"]
    killed = await spawn(["sleep", "100"])
    os.kill(killed.pid, signal.SIGTERM)
    status = await asyncio.wait_for(killed.done, 10)
    assert (status.exit_code, status.signal) == (None, "SIGTERM")


async def test_concurrent_opens_each_get_their_own_child_and_status() -> None:
    provider = LocalTerminalProvider()
    for _ in range(50):
        processes = await asyncio.gather(
            *(
                provider.spawn_terminal(
                    TerminalSpawnSpec(argv=["sh", "-c", f"echo token-{n}-$$; exit {n}"])
                )
                for n in range(16)
            )
        )
        outputs = [Output(p) for p in processes]
        try:
            statuses = await asyncio.wait_for(asyncio.gather(*(p.done for p in processes)), 20)
        finally:
            for p in processes:
                await p.terminate()
        assert [s.exit_code for s in statuses] == list(range(16))
        for n, (process, output) in enumerate(zip(processes, outputs, strict=True)):
            assert f"token-{n}-{process.pid}".encode() in output.data
        assert len({p.pid for p in processes}) == 16


async def test_a_burst_of_opens_beyond_a_small_backlog_all_succeed() -> None:
    provider = LocalTerminalProvider()
    warm = await provider.spawn_terminal(TerminalSpawnSpec(argv=["true"]))
    await warm.terminate()
    server = _server().pid
    processes = await asyncio.gather(
        *(
            provider.spawn_terminal(TerminalSpawnSpec(argv=["sh", "-c", "exit 3"]))
            for _ in range(200)
        )
    )
    try:
        statuses = await asyncio.wait_for(asyncio.gather(*(p.done for p in processes)), 60)
    finally:
        for p in processes:
            await p.terminate()
    assert {s.exit_code for s in statuses} == {3}
    assert _server().pid == server  # no open mistook a busy server for a dead one


async def test_500_open_close_cycles_leak_no_descriptor_here_or_in_the_server() -> None:
    provider = LocalTerminalProvider()
    warm = await provider.spawn_terminal(TerminalSpawnSpec(argv=["true"]))
    await warm.terminate()
    server = _server()
    fds, server_fds = len(os.listdir("/proc/self/fd")), server.num_fds()
    for _ in range(500):
        process = await provider.spawn_terminal(TerminalSpawnSpec(argv=["cat"]))
        await process.terminate()
    assert len(os.listdir("/proc/self/fd")) == fds
    # The server closes a connection when it reads its end of file, a moment later.
    assert await until_true(lambda: server.num_fds() <= server_fds), server.num_fds()
    assert server.children() == [], "the server left children (zombies included)"


# -- how the server fails ------------------------------------------------------------------


async def test_a_killed_server_is_replaced_and_its_terminals_live_on(spawn: Spawn) -> None:
    before = await spawn(["/bin/bash", "--noprofile", "--norc", "-i"], env={"PS1": "$ "})
    before_out = Output(before)
    old = _server()
    old.kill()  # our own child: the test started it through the provider
    old.wait(5)
    # An open after the kill starts a new server (the first attempt may find the old
    # address gone, or be refused; either way it must succeed).
    after = await spawn(["sh", "-c", "echo fresh; exit 5"])
    assert (await asyncio.wait_for(after.done, 10)).exit_code == 5
    assert _server().pid != old.pid
    # The older terminal still works and still ends cleanly; only its status is lost.
    await before.write("echo still-here\n")
    await before_out.wait_for(b"still-here\r\n")
    await before.terminate()
    assert before.done.done()
    assert _gone(before.pid)


def _signal_on_receive(monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, Any]:
    """Make the client set an event when it starts waiting for the server's answer.

    Returns the event and the real receive function, to put back with ``monkeypatch``.
    """
    waiting = asyncio.Event()
    real_receive = forkclient._receive

    async def gated(loop: asyncio.AbstractEventLoop, sock: socket.socket, **options: Any) -> Any:
        waiting.set()
        return await real_receive(loop, sock, **options)

    monkeypatch.setattr(forkclient, "_receive", gated)
    return waiting, real_receive


async def test_a_server_killed_while_answering_is_replaced_and_the_open_retried(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    await spawn(["true"])
    for _ in range(50):
        server = _server()
        waiting, real_receive = _signal_on_receive(monkeypatch)
        server.suspend()  # holds the request unanswered
        try:
            task = asyncio.ensure_future(spawn(["sh", "-c", "exit 9"]))
            await asyncio.wait_for(waiting.wait(), 10)
            monkeypatch.setattr(forkclient, "_receive", real_receive)
            server.kill()
            server.wait(5)
        finally:
            with contextlib.suppress(psutil.Error):
                server.resume()
        process = await asyncio.wait_for(task, 10)
        assert (await asyncio.wait_for(process.done, 10)).exit_code == 9
        assert _server().pid != server.pid


async def test_a_cancelled_open_leaves_no_child_in_the_server(
    spawn: Spawn, monkeypatch: pytest.MonkeyPatch
) -> None:
    await spawn(["true"])
    server = _server()
    for _ in range(50):
        waiting, real_receive = _signal_on_receive(monkeypatch)
        server.suspend()
        try:
            task = asyncio.ensure_future(spawn(["sleep", "100"]))
            await asyncio.wait_for(waiting.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        finally:
            server.resume()
            monkeypatch.setattr(forkclient, "_receive", real_receive)
        # The server forks the child, cannot hand it over, SIGKILLs and reaps it.
        assert await until_true(lambda: server.children() == []), server.children()
    assert _server().pid == server.pid


async def test_an_exec_failure_is_a_clear_error_and_leaves_nothing(
    spawn: Spawn, tmp_path: Path
) -> None:
    await spawn(["true"])
    server = _server()
    script = tmp_path / "bad-interpreter"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    for _ in range(50):
        with pytest.raises(TerminalError) as info:
            await asyncio.wait_for(spawn([str(script)]), 10)
        assert info.value.code == "SPAWN_FAILED"
        assert "cannot exec" in info.value.message and "No such file" in info.value.message
    assert server.children() == []
    assert _server().pid == server.pid  # the server survives a bad request


async def test_only_the_host_may_ask_the_server_for_terminals(spawn: Spawn) -> None:
    await spawn(["true"])
    running = fork_server()._running
    assert running is not None
    intruder = textwrap.dedent(
        """
        import json, socket, sys
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect("\\0" + sys.argv[1])
        try:
            s.send(json.dumps({"executable": "/bin/true", "argv": ["true"], "cwd": "/",
                               "env": {}, "rows": 24, "cols": 80}).encode())
            print("answer", repr(s.recv(4096)))
        except OSError as exc:
            print("answer refused", exc)
        """
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", intruder, running.address[1:]],
        capture_output=True,
        text=True,
        timeout=20,
    )
    answer = result.stdout
    assert "answer b''" in answer or "answer refused" in answer, answer + result.stderr
    assert _server().children() == []


async def test_a_server_that_cannot_start_falls_back_to_in_process_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "forkserver.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(forkclient, "_SERVER", broken)
    monkeypatch.setattr(forkclient, "_SERVER_SINGLETON", ForkServer())
    provider = LocalTerminalProvider()
    with caplog.at_level(logging.WARNING, logger="dsh_terminal_core.provider.forkclient"):
        process = await provider.spawn_terminal(TerminalSpawnSpec(argv=["sh", "-c", "exit 4"]))
    try:
        assert psutil.Process(process.pid).ppid() == os.getpid()  # forked here
        assert (await asyncio.wait_for(process.done, 10)).exit_code == 4
    finally:
        await process.terminate()
    assert any("spawned in-process" in r.getMessage() for r in caplog.records)


async def test_in_process_spawner_is_still_available() -> None:
    provider = LocalTerminalProvider(spawner="in-process")
    process = await provider.spawn_terminal(TerminalSpawnSpec(argv=["sh", "-c", "exit 6"]))
    try:
        assert psutil.Process(process.pid).ppid() == os.getpid()
        assert (await asyncio.wait_for(process.done, 10)).exit_code == 6
    finally:
        await process.terminate()
    with pytest.raises(TerminalError) as info:
        LocalTerminalProvider(spawner="threads")  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT"


HOST = textwrap.dedent(
    """
    import asyncio, sys
    from dsh_terminal_core.provider import LocalTerminalProvider, TerminalSpawnSpec
    from dsh_terminal_core.provider.forkclient import fork_server

    async def main():
        process = await LocalTerminalProvider().spawn_terminal(
            TerminalSpawnSpec(argv=["sleep", "300"]))
        print(fork_server().pid, process.pid, flush=True)
        if sys.argv[1] == "exit":
            return
        await asyncio.sleep(300)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("how", ["sigkill", "exit"])
def test_the_server_dies_with_its_host(how: str) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", HOST, how], stdout=subprocess.PIPE, text=True
    ) as host:
        assert host.stdout is not None
        server_pid, child_pid = (int(x) for x in host.stdout.readline().split())
        server = psutil.Process(server_pid)
        child = psutil.Process(child_pid)
        if how == "sigkill":
            host.kill()
        host.wait(30)
        deadline = time.monotonic() + 10
        while not (_gone(server.pid) and _gone(child.pid)) and time.monotonic() < deadline:
            time.sleep(0.02)
        alive = [p for p in (server, child) if not _gone(p.pid)]
        for proc in alive:  # only on failure: they are ours to clean up
            with contextlib.suppress(psutil.Error):
                proc.kill()
        assert alive == [], f"outlived the host: {alive}"


def _gone(pid: int) -> bool:
    """Exited: no such process, or a zombie (an orphan's reaping is init's business)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
