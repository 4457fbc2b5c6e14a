"""The world protocol's framing: round trips, banners before the magic, and garbage."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_terminal_core.worlds.frames import (
    MAGIC,
    MAX_PREAMBLE,
    Frame,
    FrameError,
    FrameReader,
    encode_frame,
)


def test_frames_round_trip_in_pieces_of_any_size() -> None:
    frames = [
        ({"t": "out", "sid": "pty-1", "seq": 1}, "héllo wörld\n語".encode()),
        ({"t": "settled", "op": "o1", "result": {"exitCode": 0}}, b""),
        ({"t": "send", "secret": True}, b"\x00\xff raw bytes"),
    ]
    wire = MAGIC + b"".join(encode_frame(h, p) for h, p in frames)
    for step in (1, 2, 7, len(wire)):
        reader = FrameReader()
        got: list[Frame] = []
        for at in range(0, len(wire), step):
            got.extend(reader.feed(wire[at : at + step]))
        assert [(f.header, f.payload) for f in got] == frames


def test_a_banner_before_the_magic_is_skipped_and_kept() -> None:
    reader = FrameReader()
    banner = b"Welcome to host\r\nLast login: today\r\n"
    assert reader.feed(banner + MAGIC[:3]) == []
    got = reader.feed(MAGIC[3:] + encode_frame({"t": "hello"}))
    assert [f.type for f in got] == ["hello"]
    assert reader.preamble == banner


def test_no_magic_in_the_allowed_preamble_is_malformed() -> None:
    reader = FrameReader()
    with pytest.raises(FrameError) as refused:
        reader.feed(b"x" * (MAX_PREAMBLE + len(MAGIC)))
    assert refused.value.code == "MALFORMED_FRAME"


def test_an_oversize_frame_is_refused_before_it_is_read() -> None:
    reader = FrameReader(max_frame=1024)
    with pytest.raises(FrameError) as refused:
        reader.feed(MAGIC + struct.pack(">I", 1025))
    assert refused.value.code == "FRAME_TOO_LARGE"


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">H", 2) + b"{}",  # no t
        struct.pack(">H", 4) + b"[1,]",  # not JSON
        struct.pack(">H", 2) + b"\xff\xfe",  # not UTF-8
        struct.pack(">H", 11) + b'{"t":"x"}{}',  # a second value after the header's
        struct.pack(">H", 10) + b'{"t":"x"}x',  # garbage after it
        struct.pack(">H", 9) + b"{}",  # header longer than its frame
        b"\x00",  # no room for a header length
    ],
)
def test_a_malformed_frame_says_so(body: bytes) -> None:
    reader = FrameReader()
    with pytest.raises(FrameError) as refused:
        reader.feed(MAGIC + struct.pack(">I", len(body)) + body)
    assert refused.value.code == "MALFORMED_FRAME"


@settings(max_examples=500, deadline=None)
@given(garbage=st.binary(max_size=300), cut=st.integers(0, 300))
def test_garbage_never_raises_anything_but_a_frame_error(garbage: bytes, cut: int) -> None:
    reader = FrameReader(max_frame=4096)
    data = MAGIC + garbage
    try:
        reader.feed(data[:cut])
        frames = reader.feed(data[cut:])
    except FrameError as refused:
        assert refused.code in ("MALFORMED_FRAME", "FRAME_TOO_LARGE")
        return
    for frame in frames:
        assert isinstance(frame.header, dict) and isinstance(frame.header["t"], str)


def test_a_header_is_compact_json() -> None:
    encoded = encode_frame({"t": "ping", "n": 1})
    (length,) = struct.unpack(">I", encoded[:4])
    (header_length,) = struct.unpack(">H", encoded[4:6])
    assert length == len(encoded) - 4
    assert json.loads(encoded[6 : 6 + header_length]) == {"t": "ping", "n": 1}


def test_frames_before_a_fault_come_first_then_the_fault() -> None:
    reader = FrameReader(max_frame=1024)
    wire = MAGIC + encode_frame({"t": "hello"}) + struct.pack(">I", 4096)
    assert [f.type for f in reader.feed(wire)] == ["hello"]
    with pytest.raises(FrameError) as refused:
        reader.check()
    assert refused.value.code == "FRAME_TOO_LARGE"


@pytest.mark.parametrize("raw", [b' {"t":"x"}', b'{"t":"x"} \n', b'{ "t" : "x" }'])
def test_a_header_with_whitespace_around_it_is_still_read(raw: bytes) -> None:
    reader = FrameReader()
    body = struct.pack(">H", len(raw)) + raw + b"pay"
    (frame,) = reader.feed(MAGIC + struct.pack(">I", len(body)) + body)
    assert frame.header == {"t": "x"} and frame.payload == b"pay"


def test_a_large_frame_over_many_reads_then_whole_ones_in_the_last() -> None:
    big = bytes(range(256)) * 1200  # 300 KiB, read in 64 KiB pieces
    wire = encode_frame({"t": "out", "seq": 1}, big)
    tail = encode_frame({"t": "out", "seq": 2}, b"a") + encode_frame({"t": "settled"})
    reader = FrameReader()
    assert reader.feed(MAGIC) == []
    got: list[Frame] = []
    pieces = [wire[at : at + 65536] for at in range(0, len(wire), 65536)]
    pieces[-1] += tail + encode_frame({"t": "ping"})[:5]  # and the start of one more
    for piece in pieces:
        got.extend(reader.feed(piece))
    assert [(f.header.get("seq"), f.payload) for f in got] == [(1, big), (2, b"a"), (None, b"")]
    assert all(type(f.payload) is bytes for f in got)
    assert [f.type for f in reader.feed(encode_frame({"t": "ping"})[5:])] == ["ping"]


def test_a_header_encodes_as_compact_json_does() -> None:
    header = {"t": "out", "text": "héllo \u2028 語 \x00 \"q\"", "n": [1, 2.5, None, True]}
    encoded = encode_frame(header)
    expected = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    assert encoded[6:] == expected
    with pytest.raises(TypeError):
        encode_frame({"t": "x", "value": object()})
