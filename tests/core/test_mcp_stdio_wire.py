"""The stdio wire on its own: frames in and out of real pipes, on the loop and on threads.

Pipes are served non-blocking on the event loop; anything else (here a regular file)
on daemon threads. Slow and silent peers are staged with the pipe's own capacity, not
with sleeps: a reader that never reads is a pipe nobody drains.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from dsh_terminal_core.mcp.stdio import (
    READ_AHEAD,
    FrameReader,
    FrameWriter,
    _DaemonCalls,
    _Nonblocking,
)

BOUND_S = 15


@contextlib.contextmanager
def pipe() -> Iterator[tuple[int, int]]:
    read_fd, write_fd = os.pipe()
    try:
        yield read_fd, write_fd
    finally:
        for fd in (read_fd, write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def request(number: int, method: str = "ping") -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": method}).encode() + b"\n"


def reply(number: int, text: str = "") -> SessionMessage:
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=number, result={"t": text}))


async def drain(reader: FrameReader) -> list[SessionMessage | Exception]:
    return [item async for item in reader]


def ids(items: list[SessionMessage | Exception]) -> list[object]:
    return [item.message.id if isinstance(item, SessionMessage) else "error" for item in items]


# -- reading ---------------------------------------------------------------------------


async def test_frames_split_across_reads_arrive_whole_and_in_order() -> None:
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(read_fd)
        reader = FrameReader(read_fd)
        data = b"".join(request(n) for n in range(1, 4))
        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as group:
                got: list[SessionMessage | Exception] = []

                async def collect() -> None:
                    got.extend(await drain(reader))

                group.start_soon(collect)
                for cut in range(0, len(data), 7):  # frames cut mid-line, mid-token
                    os.write(write_fd, data[cut : cut + 7])
                    await anyio.lowlevel.checkpoint()
                os.close(write_fd)
        mode.restore()
    assert ids(got) == [1, 2, 3]


async def test_a_frame_longer_than_many_reads_arrives_whole_between_short_ones() -> None:
    text = "x" * (1 << 20)  # a large terminal_send: 16 reads of the wire's chunk and more
    big = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"t": text}})
    data = request(1) + big.encode() + b"\n" + request(3)
    with pipe() as (read_fd, write_fd):
        mode, writing = _Nonblocking(read_fd), _Nonblocking(write_fd)
        reader = FrameReader(read_fd)
        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as group:
                got: list[SessionMessage | Exception] = []

                async def collect() -> None:
                    got.extend(await drain(reader))

                group.start_soon(collect)
                view = memoryview(data)
                while view:  # the pipe takes what it can; the reader frees room as it reads
                    with contextlib.suppress(BlockingIOError):
                        view = view[os.write(write_fd, view[: 48 * 1024]) :]
                    await anyio.lowlevel.checkpoint()
                writing.restore()
                os.close(write_fd)
        mode.restore()
    assert ids(got) == [1, 2, 3]
    message = got[1]
    assert isinstance(message, SessionMessage)
    assert message.message.params == {"t": text}  # type: ignore[union-attr]


async def test_malformed_lines_and_invalid_utf8_are_parse_errors_between_good_frames() -> None:
    with pipe() as (read_fd, write_fd):
        os.write(write_fd, request(1) + b"{not json\n" + b'{"jsonrpc":"2.0","id":"\xff\xfe"}\n')
        os.write(write_fd, b"\n   \n" + b'{"jsonrpc": "2.0"}\n' + request(2) + b'{"cut off')
        os.close(write_fd)
        with anyio.fail_after(BOUND_S):
            got = await drain(FrameReader(read_fd))
    # Blank lines are skipped; a line cut off by end of file is dropped.
    assert ids(got) == [1, "error", "error", "error", 2]
    assert all(isinstance(item, ValueError) for item in got if not isinstance(item, SessionMessage))


async def test_a_reader_cancelled_while_waiting_loses_no_frame() -> None:
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(read_fd)
        reader = FrameReader(read_fd)
        with anyio.move_on_after(0):  # cancelled at its first wait for the silent peer
            await reader.receive()
        os.write(write_fd, request(7) + request(8))
        with anyio.fail_after(BOUND_S):
            got = [await reader.receive(), await reader.receive()]
        await reader.aclose()
        mode.restore()
    assert ids(got) == [7, 8]


async def test_a_closed_reader_leaves_the_descriptor_unwatched_and_wakes_its_waiter() -> None:
    with pipe() as (read_fd, _write_fd):
        mode = _Nonblocking(read_fd)
        reader = FrameReader(read_fd)
        outcome: list[BaseException] = []

        async def wait() -> None:
            try:
                await reader.receive()
            except anyio.ClosedResourceError as exc:
                outcome.append(exc)

        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as group:
                group.start_soon(wait)
                # Held until the waiter is parked with the descriptor watched.
                while reader._waiter is None:
                    await anyio.lowlevel.checkpoint()
                await reader.aclose()
        # The loop no longer watches the fd (removing it again finds nothing).
        assert not asyncio.get_running_loop().remove_reader(read_fd)
        mode.restore()
    assert len(outcome) == 1


async def test_frames_are_read_ahead_of_the_sdk_only_up_to_the_bound() -> None:
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(read_fd)
        reader = FrameReader(read_fd)
        count = READ_AHEAD * 3
        # One frame per write, each its own readable event, with the loop turning between.
        frames = [request(n) for n in range(1, count + 1)]
        with anyio.fail_after(BOUND_S):
            os.write(write_fd, frames[0])
            got = [await reader.receive()]
            for frame in frames[1:]:
                os.write(write_fd, frame)
                await anyio.lowlevel.checkpoint()
            # The SDK took one frame; the reader stopped at its bound and left the rest
            # in the pipe (the loop no longer watches it), however long the loop runs.
            for _ in range(20):
                await anyio.lowlevel.checkpoint()
            assert len(reader._ready) == READ_AHEAD
            assert not asyncio.get_running_loop().remove_reader(read_fd)
            unread = bytearray(fcntl.ioctl(read_fd, termios.FIONREAD, b"\0\0\0\0"))
            assert struct.unpack("i", unread)[0] == sum(map(len, frames[READ_AHEAD + 1 :]))
            os.close(write_fd)
            got += await drain(reader)
        mode.restore()
    assert ids(got) == list(range(1, count + 1))


async def test_a_failure_while_framing_reaches_the_reader_instead_of_the_loop() -> None:
    # The loop's callback frames what it reads; a failure there (none is known: a parse
    # error is a ValueError item) must reach the SDK's receive, not die in the loop's
    # exception handler and leave the receive waiting forever.
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(read_fd)
        reader = FrameReader(read_fd)
        frame = reader._frame

        def failing(chunk: bytes) -> None:
            if b'"id": 2' in chunk:
                raise RuntimeError("framing failed")
            frame(chunk)

        reader._frame = failing  # type: ignore[method-assign]
        with anyio.fail_after(BOUND_S):
            os.write(write_fd, request(1))
            first = await reader.receive()
            os.write(write_fd, request(2))
            with pytest.raises(RuntimeError, match="framing failed"):
                await reader.receive()
            with pytest.raises(anyio.EndOfStream):
                await reader.receive()
        assert not asyncio.get_running_loop().remove_reader(read_fd)
        mode.restore()
    assert ids([first]) == [1]


async def test_a_regular_file_is_read_on_a_daemon_thread(tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.write_bytes(request(1) + request(2))
    calls = _DaemonCalls("test-reader")
    fd = os.open(frames, os.O_RDONLY)
    try:
        with anyio.fail_after(BOUND_S):
            got = await drain(FrameReader(fd, calls))
    finally:
        calls.close()
        os.close(fd)
    assert ids(got) == [1, 2]


async def test_a_closed_reader_refuses_further_reads() -> None:
    with pipe() as (read_fd, _write_fd):
        reader = FrameReader(read_fd)
        await reader.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await reader.receive()


# -- writing ---------------------------------------------------------------------------


async def test_replies_larger_than_the_pipe_arrive_whole_and_in_order() -> None:
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(write_fd)
        writer = FrameWriter(write_fd, on_broken=lambda: None)
        big = "x" * (3 * 65536)  # more than a pipe holds: the writer must wait for us
        received = bytearray()
        read_all = functools.partial(_read_until_eof, read_fd, received)

        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.to_thread.run_sync, read_all)
                # Concurrent senders: the second queues behind the first's backlog.
                group.start_soon(writer.send, reply(1, big))
                await anyio.lowlevel.checkpoint()
                group.start_soon(writer.send, reply(2, "small"))
                await anyio.lowlevel.checkpoint()
                await writer.send(reply(3, big))
                assert writer.idle
                os.close(write_fd)
        mode.restore()
    lines = bytes(received).split(b"\n")
    assert lines[-1] == b""
    assert [json.loads(line)["id"] for line in lines[:-1]] == [1, 2, 3]
    assert json.loads(lines[0])["result"]["t"] == big


def _read_until_eof(read_fd: int, received: bytearray) -> None:
    """Collect what the pipe carries until its writer closes (run on a thread)."""
    while chunk := os.read(read_fd, 65536):
        received.extend(chunk)


async def test_a_sender_cancelled_while_waiting_leaves_its_frame_whole() -> None:
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(write_fd)
        writer = FrameWriter(write_fd, on_broken=lambda: None)
        big = "y" * (2 * 65536)
        with anyio.move_on_after(0.0):
            await writer.send(reply(1, big))  # fills the pipe, then is cancelled waiting
        assert not writer.idle
        received = bytearray()
        read_all = functools.partial(_read_until_eof, read_fd, received)

        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as group:
                group.start_soon(anyio.to_thread.run_sync, read_all)
                await writer.send(reply(2))
                os.close(write_fd)
        mode.restore()
    assert [json.loads(line)["id"] for line in bytes(received).splitlines()] == [1, 2]


async def test_a_reader_that_went_away_breaks_the_writer_once() -> None:
    broken: list[bool] = []
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(write_fd)
        writer = FrameWriter(write_fd, on_broken=lambda: broken.append(True))
        os.close(read_fd)
        for number in (1, 2):
            with pytest.raises(anyio.BrokenResourceError):
                await writer.send(reply(number))
        mode.restore()
    assert broken == [True]


async def test_a_reader_that_goes_away_while_the_writer_waits_breaks_it() -> None:
    broken: list[bool] = []
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(write_fd)
        writer = FrameWriter(write_fd, on_broken=lambda: broken.append(True))
        with anyio.fail_after(BOUND_S):
            async with anyio.create_task_group() as group:
                sent: list[BaseException] = []

                async def send_big() -> None:
                    try:
                        await writer.send(reply(1, "z" * (2 * 65536)))
                    except anyio.BrokenResourceError as exc:
                        sent.append(exc)

                group.start_soon(send_big)
                while writer.idle:  # until the pipe is full and the sender waits
                    await anyio.lowlevel.checkpoint()
                os.close(read_fd)
        mode.restore()
    assert broken == [True] and len(sent) == 1 and writer.idle


async def test_abandon_drops_the_backlog_of_a_reader_that_never_reads() -> None:
    with pipe() as (read_fd, write_fd):
        mode = _Nonblocking(write_fd)
        writer = FrameWriter(write_fd, on_broken=lambda: None)
        with anyio.move_on_after(0.0):
            await writer.send(reply(1, "w" * (2 * 65536)))
        assert not writer.idle
        writer.abandon()
        assert writer.idle
        # The loop stopped watching the fd (removing it again finds nothing).
        assert not asyncio.get_running_loop().remove_writer(write_fd)
        assert fcntl.fcntl(write_fd, fcntl.F_GETFL) & os.O_NONBLOCK
        mode.restore()
        assert not fcntl.fcntl(write_fd, fcntl.F_GETFL) & os.O_NONBLOCK
        assert os.read(read_fd, 16)  # only what the pipe took before the backlog


async def test_a_regular_file_is_written_on_a_daemon_thread(tmp_path: Path) -> None:
    out = tmp_path / "out"
    fd = os.open(out, os.O_WRONLY | os.O_CREAT)
    calls = _DaemonCalls("test-writer")
    try:
        writer = FrameWriter(fd, on_broken=lambda: None, calls=calls)
        await writer.send(reply(1))
        await writer.send(reply(2))
        await writer.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await writer.send(reply(3))
    finally:
        calls.close()
        os.close(fd)
    assert [json.loads(line)["id"] for line in out.read_bytes().splitlines()] == [1, 2]


# -- the server on its descriptors -----------------------------------------------------

SERVER = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def _frames(*messages: dict[str, object]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


def test_files_for_stdin_and_stdout_are_served_and_end_at_eof(tmp_path: Path) -> None:
    """Neither descriptor is a pipe: both go to daemon threads, and EOF ends the server."""
    frames = tmp_path / "in"
    frames.write_bytes(
        _frames(
            INITIALIZE,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        + b"garbage\n"
    )
    out = tmp_path / "out"
    with frames.open("rb") as stdin, out.open("wb") as stdout:
        done = subprocess.run(
            [*SERVER, "--workspace", str(tmp_path)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    replies = [json.loads(line) for line in out.read_bytes().splitlines()]
    # The garbage line is handed to the SDK as a parse error, which it drops.
    assert [message.get("id") for message in replies] == [0, 1]
    assert any(tool["name"] == "terminal_send" for tool in replies[1]["result"]["tools"])


def _unread(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def test_sigterm_ends_a_server_whose_client_neither_reads_nor_writes(tmp_path: Path) -> None:
    """Replies fill the pipe nobody reads; SIGTERM still ends the server promptly, exit 0."""
    process = subprocess.Popen(
        [*SERVER, "--workspace", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stderr is not None
    try:
        listings = [{"jsonrpc": "2.0", "id": n, "method": "tools/list"} for n in range(1, 60)]
        process.stdin.write(_frames(INITIALIZE, *listings))
        process.stdin.flush()  # stdin stays open and silent from here on
        # Wait until the replies nobody reads have filled the pipe (the server's writer
        # now waits on it), then stop the server.
        assert process.stdout is not None
        deadline = time.monotonic() + BOUND_S
        while _unread(process.stdout.fileno()) < 65536 // 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _unread(process.stdout.fileno()) >= 65536 // 2
        process.terminate()
        status = process.wait(timeout=BOUND_S)
        assert status == 0, process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
