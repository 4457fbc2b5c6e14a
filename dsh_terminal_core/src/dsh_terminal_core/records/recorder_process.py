"""The recorder process: turns the harness's raw session events into asciicast v2 files.

Run as a script (``python -I -S recorder_process.py``) by :mod:`.link`; it imports only
the standard library, so it starts in milliseconds and holds little memory. Encoding
events as JSON costs about as much CPU as the harness spends on the output itself;
done here, on another core, it never takes the harness's event loop.

Input (stdin): frames of a 4-byte big-endian length and a :mod:`marshal` payload, a list
of operations::

    ("open", key, path, header_line, max_bytes)
    ("o" | "i", key, seconds, data)      # raw bytes, decoded here as UTF-8
    ("m" | "r", key, seconds, text)
    ("close", key)

Replies (stdout), one JSON object a line: ``{"opened": key, "path": ...}``,
``{"closed": key}``, ``{"failed": key, "path": ..., "why": ...}`` (the file could not be
created or written: that recording ends) and ``{"cut": key, "path": ...}`` (it reached
``max_bytes``). At end of input every recording is finished and closed, so a harness
that dies loses only what it had not handed over yet.

Each frame's lines are written before the next frame is read. Output that arrives in
quick succession (within :data:`COALESCE_S`) is one event.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import marshal
import os
import signal
import struct
import sys
from typing import Any, BinaryIO

COALESCE_S = 0.02
COALESCE_BYTES = 256 * 1024
END_RESERVE = 200
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class _Cast:
    __slots__ = (
        "counted",
        "decoders",
        "ended",
        "fd",
        "key",
        "last",
        "lines",
        "max_bytes",
        "path",
        "run",
    )

    def __init__(self, key: int, path: str, max_bytes: int) -> None:
        self.key = key
        self.path = path
        self.max_bytes = max_bytes
        self.fd: int | None = None
        self.counted = 0
        self.last = 0.0  # the seconds of the newest event
        self.ended = False
        self.lines: list[bytes] = []
        self.decoders = {
            "o": codecs.getincrementaldecoder("utf-8")("replace"),
            "i": codecs.getincrementaldecoder("utf-8")("replace"),
        }
        # Output waiting to become one event: [first seconds, chunks, bytes].
        self.run: list[Any] | None = None


class Recorder:
    """Applies operations to the open recordings and reports what the harness must know."""

    def __init__(self, replies: Any) -> None:
        self._replies: Any = replies
        self._casts: dict[int, _Cast] = {}

    def apply(self, ops: list[tuple[Any, ...]], data: bytes) -> None:
        view = memoryview(data)
        offset = 0
        for op in ops:
            kind = op[0]
            if kind in ("o", "i"):
                size = op[3]
                op = (kind, op[1], op[2], view[offset : offset + size])
                offset += size
            if kind == "open":
                self._open(*op[1:])
                continue
            cast = self._casts.get(op[1])
            if cast is None:
                continue
            if kind == "o":
                cast.last = op[2]
                self._output(cast, op[2], op[3])
            elif kind == "close":
                self._close(cast, op[2])
            else:
                cast.last = op[2]
                self._end_run(cast)
                text = op[3]
                if kind == "i":
                    text = cast.decoders["i"].decode(bytes(text))
                    if not text:
                        continue
                self._event(cast, op[2], kind, text)
        for cast in list(self._casts.values()):
            self._end_run(cast)
            self._write(cast)
        self._flush_replies()

    def finish(self) -> None:
        """End every recording: the harness is gone."""
        for cast in list(self._casts.values()):
            self._close(cast, cast.last)
        self._flush_replies()

    # -- recordings -----------------------------------------------------------------------

    def _open(self, key: int, path: str, header: bytes, max_bytes: int) -> None:
        cast = _Cast(key, path, max_bytes)
        self._casts[key] = cast
        base, ext = os.path.splitext(path)
        for attempt in range(1, 100):
            candidate = path if attempt == 1 else f"{base}-{attempt}{ext}"
            try:
                cast.fd = os.open(candidate, _FLAGS, 0o600)
            except FileExistsError:
                continue
            except OSError as exc:
                self._fail(cast, f"cannot create {candidate}: {exc.strerror or exc}")
                return
            cast.path = candidate
            break
        else:
            self._fail(cast, f"cannot create {path}: every name is taken")
            return
        self._reply({"opened": key, "path": cast.path})
        cast.lines.append(header)
        cast.counted = len(header)

    def _output(self, cast: _Cast, seconds: float, data: bytes) -> None:
        run = cast.run
        if run is not None and seconds - run[0] < COALESCE_S and run[2] < COALESCE_BYTES:
            run[1].append(data)
            run[2] += len(data)
            return
        self._end_run(cast)
        cast.run = [seconds, [data], len(data)]

    def _end_run(self, cast: _Cast) -> None:
        run = cast.run
        if run is None:
            return
        cast.run = None
        text = cast.decoders["o"].decode(b"".join(run[1]))
        if text:
            self._event(cast, run[0], "o", text)

    def _event(self, cast: _Cast, seconds: float, code: str, text: str) -> None:
        if cast.ended:
            return
        line = _event_line(seconds, code, text)
        room = cast.max_bytes - END_RESERVE - cast.counted
        if len(line) > room:
            # Keep what fits of this event, cut between characters (so on a UTF-8
            # boundary): the recording holds the output up to its cap, then the marker.
            kept = _fitting_prefix(seconds, code, text, room)
            if kept:
                cast.lines.append(_event_line(seconds, code, kept))
            label = f"recording stopped: max_bytes ({cast.max_bytes}) reached"
            cast.lines.append(f'[{seconds:.6f}, "m", {json.dumps(label)}]\n'.encode())
            self._write(cast)
            self._reply({"cut": cast.key, "path": cast.path})
            self._shut(cast)
            return
        cast.counted += len(line)
        cast.lines.append(line)

    def _close(self, cast: _Cast, seconds: float) -> None:
        self._end_run(cast)
        tail = cast.decoders["o"].decode(b"", final=True)
        if tail:
            self._event(cast, seconds, "o", tail)
        self._write(cast)
        self._shut(cast)
        self._casts.pop(cast.key, None)
        self._reply({"closed": cast.key})

    def _write(self, cast: _Cast) -> None:
        if not cast.lines:
            return
        data = memoryview(b"".join(cast.lines))
        cast.lines.clear()
        if cast.fd is None:
            return
        try:
            while data:
                data = data[os.write(cast.fd, data) :]
        except OSError as exc:
            self._fail(cast, f"cannot write {cast.path}: {exc.strerror or exc}")

    def _fail(self, cast: _Cast, why: str) -> None:
        self._reply({"failed": cast.key, "path": cast.path, "why": why})
        self._shut(cast)

    def _shut(self, cast: _Cast) -> None:
        cast.ended = True
        cast.lines.clear()
        fd, cast.fd = cast.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError as exc:
                self._reply({"failed": cast.key, "path": cast.path, "why": str(exc)})

    def _reply(self, message: dict[str, Any]) -> None:
        if self._replies is None:
            return
        try:
            self._replies.write(json.dumps(message).encode() + b"\n")
        except OSError:  # the harness stopped reading: it is gone; the files still close
            self._replies = None

    def _flush_replies(self) -> None:
        if self._replies is None:
            return
        try:
            self._replies.flush()
        except OSError:
            self._replies = None


def _frames(source: BinaryIO) -> Any:
    header = struct.Struct(">II")
    while True:
        head = source.read(header.size)
        if len(head) < header.size:
            return
        meta_size, data_size = header.unpack(head)
        meta = source.read(meta_size)
        data = source.read(data_size)
        if len(meta) < meta_size or len(data) < data_size:
            return
        yield marshal.loads(meta), data


def _event_line(seconds: float, code: str, text: str) -> bytes:
    """One asciicast v2 event line."""
    body = json.dumps(text, ensure_ascii=False)
    return f'[{seconds:.6f}, "{code}", {body}]\n'.encode("utf-8", "backslashreplace")


def _fitting_prefix(seconds: float, code: str, text: str, room: int) -> str:
    """The longest start of ``text`` whose event line takes at most ``room`` bytes.

    Escaping makes a character take one to twelve bytes, so the cut is searched for;
    it happens once per recording.
    """
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if len(_event_line(seconds, code, text[:middle])) <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def main() -> int:
    # A Ctrl-C meant for the harness must not cut the files short: the end of input ends us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Behind the terminals and the harness for the CPU: it catches up when they pause.
    with contextlib.suppress(OSError):
        os.nice(10)
    # Unbuffered, and not sys.stdout: nothing is left to flush at exit into a pipe whose
    # reader (a harness killed outright) is gone.
    replies = open(sys.stdout.fileno(), "wb", buffering=0, closefd=False)  # noqa: SIM115
    recorder = Recorder(replies)
    try:
        for ops, data in _frames(sys.stdin.buffer):
            recorder.apply(ops, data)
    finally:
        recorder.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
