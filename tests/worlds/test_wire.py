"""A world connection over real sockets and pipes: frames dispatched as they are read,
faults refused, output merged, flow control, and every descriptor closed."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsh_terminal_core.worlds.connection import Connection
from dsh_terminal_core.worlds.frames import MAGIC, Frame, FrameReader, encode_frame
from dsh_terminal_core.worlds.wire import connect_unix, over_pipes, serve_unix

MAX = 1 << 20


def _open_fds() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[Connection, socket.socket]]:
    """A connection to a unix socket (:func:`connect_unix`), and the raw accepted end."""
    path = str(tmp_path / "w.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    connection = await connect_unix(path, max_frame=MAX)
    theirs, _ = listener.accept()
    listener.close()
    theirs.setblocking(False)
    try:
        yield connection, theirs
    finally:
        connection.close()
        theirs.close()


async def _shaken(pair: tuple[Connection, socket.socket], *after: Frame) -> None:
    """The peer says hello (and sends ``after`` with it); ours is read."""
    connection, peer = pair
    extra = b"".join(encode_frame(f.header, f.payload) for f in after)
    await _send_raw(peer, MAGIC + encode_frame({"t": "hello"}) + extra)
    assert (await connection.handshake({}, timeout_s=5))["t"] == "hello"


def _dispatching(connection: Connection, seen: list[str]) -> asyncio.Future[None]:
    """A dispatch noting each frame's type in ``seen``."""
    return asyncio.ensure_future(connection.dispatch(lambda f: seen.append(f.type)))


async def _send_raw(peer: socket.socket, data: bytes) -> None:
    await asyncio.get_running_loop().sock_sendall(peer, data)


async def _read_frames(peer: socket.socket, reader: FrameReader, want: int) -> list[Frame]:
    got: list[Frame] = []
    loop = asyncio.get_running_loop()
    while len(got) < want:
        data = await asyncio.wait_for(loop.sock_recv(peer, 65536), 5)
        assert data, "the connection closed early"
        got.extend(reader.feed(data))
    return got


async def test_frames_read_before_dispatch_come_first_then_each_in_its_read(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, peer = pair
    await _shaken(pair, Frame({"t": "a", "n": 1}))
    seen: list[tuple[str, object]] = []
    arrived = asyncio.Event()

    def handler(frame: Frame) -> None:
        seen.append((frame.type, frame.header.get("n")))
        if len(seen) == 3:
            arrived.set()

    dispatching = asyncio.ensure_future(connection.dispatch(handler))
    await _send_raw(peer, encode_frame({"t": "a", "n": 2}) + encode_frame({"t": "a", "n": 3})[:5])
    await asyncio.sleep(0)  # nothing for a partial frame
    await _send_raw(peer, encode_frame({"t": "a", "n": 3})[5:])
    await asyncio.wait_for(arrived.wait(), 5)
    assert seen == [("a", 1), ("a", 2), ("a", 3)]
    peer.shutdown(socket.SHUT_WR)
    await asyncio.wait_for(dispatching, 5)  # the peer's end of file ends the dispatch


async def test_a_second_hello_is_refused_with_bye(pair: tuple[Connection, socket.socket]) -> None:
    connection, peer = pair
    await _shaken(pair)
    seen: list[str] = []
    dispatching = _dispatching(connection, seen)
    await _send_raw(peer, encode_frame({"t": "a"}) + encode_frame({"t": "hello"}))
    await asyncio.wait_for(dispatching, 5)
    assert seen == ["a"]
    reader = FrameReader()
    frames = await _read_frames(peer, reader, 2)  # our hello, then the bye
    assert frames[-1].header["t"] == "bye"
    assert frames[-1].header["code"] == "PROTOCOL_ORDER"
    assert connection.closed


async def test_frames_before_a_malformed_one_are_dispatched_then_it_is_refused(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, peer = pair
    await _shaken(pair)
    seen: list[str] = []
    dispatching = _dispatching(connection, seen)
    garbage = struct.pack(">IH", 6, 4) + b"{x}!"
    await _send_raw(peer, encode_frame({"t": "a"}) + encode_frame({"t": "b"}) + garbage)
    await asyncio.wait_for(dispatching, 5)
    assert seen == ["a", "b"]
    frames = await _read_frames(peer, FrameReader(), 2)
    assert (frames[-1].header["t"], frames[-1].header["code"]) == ("bye", "MALFORMED_FRAME")


async def test_a_fault_read_before_dispatch_is_refused_when_it_starts(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, peer = pair
    oversize = struct.pack(">I", MAX + 1)
    await _send_raw(peer, MAGIC + encode_frame({"t": "hello"}) + encode_frame({"t": "a"}) + oversize)
    await connection.handshake({}, timeout_s=5)
    seen: list[str] = []
    await asyncio.wait_for(connection.dispatch(lambda f: seen.append(f.type)), 5)
    assert seen == ["a"]
    frames = await _read_frames(peer, FrameReader(), 2)
    assert frames[-1].header["code"] == "FRAME_TOO_LARGE"


async def test_a_handler_that_raises_stops_the_dispatch_with_its_error(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, peer = pair
    await _shaken(pair)
    seen: list[str] = []

    def handler(frame: Frame) -> None:
        seen.append(frame.type)
        if frame.type == "boom":
            raise ValueError("the handler failed")

    dispatching = asyncio.ensure_future(connection.dispatch(handler))
    await _send_raw(peer, encode_frame({"t": "boom"}) + encode_frame({"t": "after"}))
    with pytest.raises(ValueError, match="the handler failed"):
        await asyncio.wait_for(dispatching, 5)
    assert seen == ["boom"]  # nothing after the failure is dispatched


async def test_closing_ends_a_dispatch_waiting_for_frames(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, _ = pair
    await _shaken(pair)
    dispatching = _dispatching(connection, [])
    await asyncio.sleep(0)
    connection.close()
    await asyncio.wait_for(dispatching, 5)


async def test_output_of_one_key_merges_until_another_frame_or_a_write(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, peer = pair
    first, second = object(), object()
    connection.send({"t": "out", "n": 1}, b"echo x\r\n", linger=True, merge=first)
    connection.send({"t": "out", "n": 2}, b"x\r\n", linger=True, merge=first)
    connection.send({"t": "out", "n": 3}, b"other\n", linger=True, merge=second)
    connection.send({"t": "out", "n": 4}, b"more\n", linger=True, merge=first)
    connection.send({"t": "settled"}, b"", now=True)
    connection.send({"t": "out", "n": 5}, b"late\n", linger=True, merge=first)
    connection.send({"t": "out", "n": 6}, b"\xff" * (64 * 1024), linger=True, merge=first)
    connection.send({"t": "end"}, now=True)
    reader = FrameReader()
    reader.feed(MAGIC)
    frames = await _read_frames(peer, reader, 7)
    assert [(f.header["t"], f.header.get("n"), f.payload[:16]) for f in frames] == [
        ("out", 2, b"echo x\r\nx\r\n"),  # the header of the last, both payloads
        ("out", 3, b"other\n"),
        ("out", 4, b"more\n"),  # another key came between
        ("settled", None, b""),
        ("out", 5, b"late\n"),  # the write in between ended the merge
        ("out", 6, b"\xff" * 16),  # over the bound: a frame of its own
        ("end", None, b""),
    ]


async def test_drain_waits_while_the_peer_does_not_read(
    pair: tuple[Connection, socket.socket],
) -> None:
    connection, peer = pair
    chunk = b"y" * 60_000
    for _ in range(64):  # far over the socket buffers and the transport's high-water mark
        connection.send({"t": "out"}, chunk)
    draining = asyncio.ensure_future(connection.drain())
    await asyncio.sleep(0.05)
    assert not draining.done()  # nobody reads: the buffer stays full
    loop = asyncio.get_running_loop()
    received = 0
    while not draining.done():
        received += len(await asyncio.wait_for(loop.sock_recv(peer, 1 << 20), 5))
    await draining
    assert received > 0


async def test_pipes_end_on_eof_and_closing_frees_both_descriptors() -> None:
    before = _open_fds()
    their_in, our_out = os.pipe()
    our_in, their_out = os.pipe()
    connection = await over_pipes(our_in, our_out, max_frame=MAX)
    os.write(their_out, MAGIC + encode_frame({"t": "hello", "v": 1}))
    hello = await connection.handshake({"side": "ours"}, timeout_s=5)
    assert hello["v"] == 1
    seen: list[str] = []
    dispatching = _dispatching(connection, seen)
    os.write(their_out, encode_frame({"t": "a"}))
    os.close(their_out)  # end of file on our side
    await asyncio.wait_for(dispatching, 5)
    assert seen == ["a"]
    connection.close()
    await asyncio.wait_for(connection.wait_closed(), 5)
    reader = FrameReader()
    frames = reader.feed(os.read(their_in, 65536))
    assert frames[0].header == {"t": "hello", "side": "ours"}
    assert os.read(their_in, 65536) == b""  # our writing end is closed
    os.close(their_in)
    assert _open_fds() == before


async def test_a_peer_the_daemon_does_not_allow_is_closed_unread(tmp_path: Path) -> None:
    path = str(tmp_path / "w.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    listener.setblocking(False)
    served: list[Connection] = []

    async def on_connection(connection: Connection) -> None:
        served.append(connection)

    allow = [False]
    server = await serve_unix(
        listener, on_connection, max_frame=MAX, allowed=lambda sock: allow[0]
    )
    try:
        loop = asyncio.get_running_loop()
        for allowed in (False, True):
            allow[0] = allowed
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            client.setblocking(False)
            await loop.sock_connect(client, path)
            await loop.sock_sendall(client, MAGIC + encode_frame({"t": "hello"}))
            if not allowed:
                try:  # closed unread: an end of file, or a reset for the hello it dropped
                    said = await asyncio.wait_for(loop.sock_recv(client, 1024), 5)
                except ConnectionResetError:
                    said = b""
                assert said == b""
                assert served == []
            else:
                async with asyncio.timeout(5):
                    while not served:
                        await asyncio.sleep(0.01)
                assert (await served[0].handshake({}, timeout_s=5))["t"] == "hello"
                served[0].close()
            client.close()
    finally:
        server.close()
        await server.wait_closed()
