"""The world protocol's framing: a magic, then length-prefixed frames of header + payload.

::

    magic, once per direction:  89 44 53 48 57 0D 0A 1A      "\\x89DSHW\\r\\n\\x1a"
    frame:  u32 length (big-endian: the bytes after this field)
            u16 header length
            header: one JSON object, UTF-8, with a string "t" (the message type)
            payload: raw bytes (output, input, screen JSON), the rest of the frame

The magic is PNG's idea: its high byte catches a 7-bit channel, ``\\r\\n`` a CRLF
translation and ``\\x1a`` a text-mode reader — what a TTY in the way (``kubectl exec
-it``) does to a byte stream. Bytes before it (an ssh banner, a ``.bashrc`` that prints)
are skipped up to :data:`MAX_PREAMBLE` and kept for the error that names them if the
magic never comes. Headers are JSON (the standard library on both sides, a few hundred
bytes each) and bytes stay bytes, so output and input are never base64'd.

A :class:`FrameReader` is fed whatever the transport read and hands back whole frames.
Anything malformed raises :class:`FrameError` with the wire code the other side is told
before the connection closes; nothing else escapes, whatever bytes arrive.
"""

from __future__ import annotations

import json
import json.encoder
import struct
from typing import Any

import attrs

__all__ = [
    "DEFAULT_MAX_FRAME",
    "MAGIC",
    "MAX_PREAMBLE",
    "MIN_MAX_FRAME",
    "Frame",
    "FrameError",
    "FrameReader",
    "encode_frame",
]

MAGIC = b"\x89DSHW\r\n\x1a"
#: Bytes a peer may print before its magic (banners, login scripts).
MAX_PREAMBLE = 64 * 1024
DEFAULT_MAX_FRAME = 4 * 1024 * 1024
MIN_MAX_FRAME = 64 * 1024

_LENGTH = struct.Struct(">I")
_HEADER_LENGTH = struct.Struct(">H")
_PREFIX = _LENGTH.size + _HEADER_LENGTH.size
# One encoder and one decoder for every frame: ``json.dumps`` with options builds a new
# encoder per call and ``json.loads`` of bytes sniffs their encoding first, which is
# most of what a few hundred bytes of header cost (bench/worlds.py, per send).
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _unencodable(value: object) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder itself, made once (``JSONEncoder.encode`` makes one per call): the same
# output as ``_ENCODE``, without its check for circular containers — a header is a
# dict this package builds, never circular.
_C_ENCODER = (
    json.encoder.c_make_encoder(
        None, _unencodable, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    if json.encoder.c_make_encoder is not None
    else None
)


def _encode_header(header: dict[str, Any]) -> bytes:
    if _C_ENCODER is None:
        return _ENCODE(header).encode()
    return "".join(_C_ENCODER(header, 0)).encode()
_DECODER = json.JSONDecoder()
_DECODE = _DECODER.decode
_SCAN = _DECODER.scan_once


class FrameError(Exception):
    """A frame the protocol cannot read: ``code`` is the wire code (``MALFORMED_FRAME``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen
class Frame:
    """One message: its JSON header (``t`` names the type) and its raw payload."""

    header: dict[str, Any]
    payload: bytes = b""

    @property
    def type(self) -> str:
        kind: str = self.header["t"]
        return kind


def encode_frame(header: dict[str, Any], payload: bytes = b"") -> bytes:
    """The bytes of one frame; the header must carry ``t``."""
    encoded = _encode_header(header)
    size = len(encoded)
    if size > 0xFFFF:
        raise FrameError("FRAME_TOO_LARGE", f"a header of {size} bytes is over 65535")
    length = _HEADER_LENGTH.size + size + len(payload)
    return b"".join((_LENGTH.pack(length), _HEADER_LENGTH.pack(size), encoded, payload))


class FrameReader:
    """Incremental decoder of one direction of a connection, magic first."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buffer = bytearray()
        self._magic_seen = False
        self._error: FrameError | None = None
        self._at = 0
        self.preamble = b""
        """What the peer wrote before its magic (shown when the magic never comes)."""

    @property
    def started(self) -> bool:
        """The magic has arrived."""
        return self._magic_seen

    def feed(self, data: bytes) -> list[Frame]:
        """Take ``data`` and return every frame it completed, in order.

        Frames that came whole before a malformed one are returned first; the fault is
        raised by the next call (:meth:`check`), so a hello and garbage read together
        still give the hello, then the refusal.
        """
        self.check()
        buffer = self._buffer
        if not self._magic_seen:
            buffer += data
            if not self._find_magic():
                return []
            data = bytes(buffer)
            buffer.clear()
        elif buffer:
            buffer += data
            if len(buffer) >= _LENGTH.size:
                (length,) = _LENGTH.unpack_from(buffer)
                if length <= self.max_frame and len(buffer) < _LENGTH.size + length:
                    return []  # a large frame still arriving: no copy per read
            data = bytes(buffer)
            buffer.clear()
        # Frames are sliced from one bytes object at an offset, and only an incomplete
        # tail is kept: a read of whole frames (the usual one) is never copied whole.
        frames: list[Frame] = []
        self._at = 0
        try:
            while True:
                try:
                    frame = self._next_frame(data)
                except FrameError as fault:
                    if not frames:
                        raise
                    self._error = fault
                    return frames
                if frame is None:
                    return frames
                frames.append(frame)
        finally:
            if self._at < len(data):
                with memoryview(data) as view, view[self._at :] as rest:
                    buffer += rest

    def check(self) -> None:
        """Raise the fault found after the frames last returned, if there was one."""
        if self._error is not None:
            fault, self._error = self._error, None
            raise fault

    def _find_magic(self) -> bool:
        at = self._buffer.find(MAGIC)
        if at < 0:
            keep = len(MAGIC) - 1  # a magic split across reads
            if len(self._buffer) > MAX_PREAMBLE + keep:
                self.preamble = bytes(self._buffer[:MAX_PREAMBLE])
                raise FrameError(
                    "MALFORMED_FRAME",
                    f"no protocol magic in the first {MAX_PREAMBLE} bytes from the peer",
                )
            return False
        self.preamble = bytes(self._buffer[:at])
        del self._buffer[: at + len(MAGIC)]
        self._magic_seen = True
        return True

    def _next_frame(self, data: bytes) -> Frame | None:
        at = self._at
        if len(data) - at < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(data, at)
        if length > self.max_frame:
            raise FrameError(
                "FRAME_TOO_LARGE", f"a frame of {length} bytes is over the {self.max_frame} agreed"
            )
        if length < _HEADER_LENGTH.size:
            raise FrameError("MALFORMED_FRAME", f"a frame of {length} bytes has no header length")
        end = at + _LENGTH.size + length
        if len(data) < end:
            return None
        (header_length,) = _HEADER_LENGTH.unpack_from(data, at + _LENGTH.size)
        if header_length > length - _HEADER_LENGTH.size:
            raise FrameError("MALFORMED_FRAME", "a header longer than its frame")
        start = at + _PREFIX
        self._at = end
        try:
            header = _decode_header(data[start : start + header_length].decode())
        except (UnicodeDecodeError, ValueError):
            raise FrameError("MALFORMED_FRAME", "a header that is not UTF-8 JSON") from None
        if not isinstance(header, dict) or not isinstance(header.get("t"), str):
            raise FrameError("MALFORMED_FRAME", "a header that is not an object with a string t")
        return Frame(header, data[start + header_length : end])


def _decode_header(text: str) -> Any:
    """The JSON value of ``text``: the scanner alone when the value fills it (what every
    encoder here writes), the full decoder (whitespace around it, its errors) otherwise."""
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:
        return _DECODE(text)
    if end != len(text):
        return _DECODE(text)
    return value
