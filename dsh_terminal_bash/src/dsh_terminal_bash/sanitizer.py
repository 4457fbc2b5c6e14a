"""Streaming sanitizer: PTY output bytes in, plain text and prompt markers out.

The model reads terminal output as text, and readiness needs to know when the shell
printed its private prompt marker. This module turns raw PTY bytes into both, chunk by
chunk, with results that never depend on where the PTY happened to split the stream:
feeding a stream in any pieces and then calling :meth:`Sanitizer.flush` yields the same
concatenated text and the same markers (at the same absolute text positions) as feeding
it whole.

Grammar (7-bit, as xterm reads UTF-8 output):

* ``ESC [`` parameter/intermediate bytes (0x20-0x3F)* and a final byte (0x40-0x7E) is a
  CSI sequence. Any other byte ends it early; that byte is then read as ordinary input.
* ``ESC ]``, ``ESC P``, ``ESC X``, ``ESC ^`` and ``ESC _`` open a string (OSC, DCS, SOS,
  PM, APC) that runs to BEL or ST (``ESC \\``). CAN or SUB aborts it and is consumed; any
  other ESC aborts it and starts the next sequence, so a stray introducer in binary
  output can never hide the real prompt marker that follows.
* ``ESC`` intermediates (0x20-0x2F)* and a final byte (0x30-0x7E) covers two-byte escapes
  (``ESC =``, ``ESC 7``) and charset designations (``ESC ( B``). Any other byte ends it
  early and is read as ordinary input.
* C0 controls other than TAB, LF, CR and BS are dropped, as is DEL: BEL, NUL, form
  feed and the rest carry no text. BS stays in the text: it changes what a line shows
  (``man``'s bold ``X\\bX``, a spinner's frames), possibly over text an earlier chunk
  already emitted, so it is applied where text leaves for a reader
  (:mod:`dsh_terminal_core.registry.overstrike`). 8-bit C1 bytes are not controls in a
  UTF-8 stream; they reach the decoder and come out as U+FFFD unless part of a character.
* CRLF and CR-CR-LF become LF, judged on the stream with escapes removed; a CR that
  no LF follows (a run of them counts as one) stays in the text as one CR: it returns
  to the start of the line, and what follows overwrites it, as a terminal shows a
  progress line. Like BS it is applied where text leaves for a reader
  (:mod:`dsh_terminal_core.registry.overstrike`), so ``X 0%\rX Done\r\r\n`` is one
  line reading ``X Done``, never three. A CR at the end of a chunk is held until the
  next byte is known, so a CRLF split across chunks is one newline. A CR still held
  when a prompt marker comes ended the line before the marker, as the prompt starts
  its own: its newline is text after the marker, but not part of the prompt tail
  (``printf 'x\r'`` and then a prompt still shows ``x`` and leaves exactly the prompt
  as the tail).
* The rest is decoded as UTF-8 incrementally, invalid bytes becoming U+FFFD.

The prompt marker is the OSC ``133;D`` (``ESC ] 133;D;<exit code> BEL``, ST also
accepted). It is reported, never emitted as text.

Memory is bounded whatever the input: an unterminated sequence is carried as a few
bytes of state plus a counter, never buffered whole. ``max_escape_bytes`` bounds what a
string sequence may hold and still count as a marker; a longer one is discarded through
its terminator like any other string.
"""

from __future__ import annotations

import codecs
import re
from typing import NamedTuple

__all__ = ["MARKER_PREFIX", "PROMPT_TAIL_CHARS", "Chunk", "Marker", "Sanitizer"]

MARKER_PREFIX = "\x1b]133;D;"
"""How the private prompt marker starts; the exit code and BEL (or ST) follow."""

PROMPT_TAIL_CHARS = 256
"""How much text after the latest marker :attr:`Sanitizer.prompt_tail` keeps."""

_MARKER_BODY_MAX = 64
"""Longest marker body that still carries an exit code; also what is kept of an open one."""

_ESC = b"\x1b"
_CR = b"\r"
# A CR that is not the first half of a CRLF.
_LONE_CR = re.compile(rb"\r[^\n]")
# CRLF and CR-CR-LF end a line; any other run of CRs returns to the line's start and
# stays in the text as one CR. Two substitutions, both in C (no callback per run: a
# progress bar sends one per frame).
_CRS_LF = re.compile(rb"\r+\n")
_CRS = re.compile(rb"\r\r+")


# Controls that carry no text: C0 except BS, TAB, LF, CR and ESC (ESC starts a sequence),
# and DEL. BS is kept for :mod:`dsh_terminal_core.overstrike`.
_DROPPED = bytes([*range(0x00, 0x08), 0x0B, 0x0C, *range(0x0E, 0x1B), *range(0x1C, 0x20), 0x7F])
_DROPPED_AND_CR = _DROPPED + _CR

# One match per sequence: complete, or ended early by the byte after it (which stays). Open
# sequences at the end of a buffer are held back before this runs. Every ESC is consumed, and
# the controls left outside sequences are deleted afterwards; starting every alternative with
# the ESC literal lets the regex engine skip plain text at memchr speed.
_SEQUENCE = re.compile(
    rb"\x1b(?:"
    rb"\[[\x20-\x3f]*[\x40-\x7e]?"
    rb"|[\]PX^_][^\x07\x18\x1a\x1b]*(?:\x07|\x1b\\|[\x18\x1a])?"
    rb"|[\x20-\x2f]*[\x30-\x7e]?"
    rb")"
)

# A sequence that the end of the buffer left open, matched from its ESC to the end.
_OPEN = re.compile(rb"\x1b(?:\[[\x20-\x3f]*|[\]PX^_][^\x07\x18\x1a\x1b]*\x1b?|[\x20-\x2f]*)")

_MARKER = re.compile(rb"\x1b\]133;D(?:;[^\x07\x18\x1a\x1b]*)?(?:\x07|\x1b\\)")
_MARKER_HINT = b"\x1b]133;D"
_MARKER_BODY_START = 2  # after ESC ]
_EXIT_FIELD_START = len(b"133;D;")
_EXIT_CODE = re.compile(rb"-?[0-9]{1,10}")


class Marker(NamedTuple):
    """A prompt marker: the ``$?`` it carried and where it sat in the chunk's text.

    ``exit_code`` is None when the marker carried no decimal exit code. ``text_offset``
    indexes :attr:`Chunk.text` of the chunk that reported it: text before the offset came
    before the marker. A named tuple: one is made for nearly every send, where a frozen
    class costs several times as much to build.
    """

    exit_code: int | None
    text_offset: int


class Chunk(NamedTuple):
    """Sanitized text of one :meth:`Sanitizer.feed` and the markers found in it, in order.

    A named tuple, as :class:`Marker` is: one is made for every piece of output.
    """

    text: str
    markers: tuple[Marker, ...] = ()


def _exit_code(body: bytes, body_len: int) -> int | None:
    """Parse the exit code of a marker body (``133;D`` or ``133;D;<code>[;...]``)."""
    if body_len > _MARKER_BODY_MAX:
        return None
    field = body[_EXIT_FIELD_START:].partition(b";")[0]
    if _EXIT_CODE.fullmatch(field) is None:
        return None
    return int(field)


class Sanitizer:
    """Turn a PTY byte stream into text and prompt markers, one chunk at a time.

    One instance per terminal stream; not thread-safe. :meth:`feed` never raises on any
    byte content and costs O(len(data)).
    """

    def __init__(self, max_escape_bytes: int = 256 * 1024) -> None:
        """Create a sanitizer at the start of a stream.

        ``max_escape_bytes`` is the largest string-sequence body that may still count as
        a marker; raises ValueError unless it is positive.
        """
        if max_escape_bytes < 1:
            raise ValueError(f"max_escape_bytes must be positive, got {max_escape_bytes}")
        self._max_escape_bytes = max_escape_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # An open sequence from the end of the last chunk, compressed to the bytes that
        # still decide its fate, plus how many inert body bytes were left out.
        self._held = b""
        self._held_elided = 0
        self._pending_cr = False
        self._tail: str | None = None
        self._last_exit_code: int | None = None
        # A CR was held when the latest marker came: the newline it turns into belongs to
        # the line before the marker, so the prompt tail skips it.
        self._cr_before_marker = False
        # The CR held now came before a prompt marker: whatever follows, it ends a line.
        self._cr_ends_line = False

    @property
    def prompt_tail(self) -> str | None:
        """Text emitted since the latest marker, or None before the first marker.

        Only the last :data:`PROMPT_TAIL_CHARS` characters are kept, which is enough to
        compare with a short prompt: a longer tail can never equal it.
        """
        return self._tail

    @property
    def last_marker_exit_code(self) -> int | None:
        """Exit code carried by the latest marker (None before one, or if it had none)."""
        return self._last_exit_code

    def feed(self, data: bytes | bytearray | memoryview) -> Chunk:
        """Sanitize the next piece of the stream.

        Text that cannot be decided yet (a trailing CR, a partial UTF-8 character, an open
        escape sequence) is held and appears in a later result or at :meth:`flush`.
        """
        buf = data if isinstance(data, bytes) else bytes(data)
        if not self._held:
            # The usual piece at a prompt: text, one complete marker, the prompt. Its
            # only escape is the marker, so the general path's search for an open
            # sequence and for more markers would find nothing: answer it directly.
            at = buf.find(_MARKER_HINT)
            if at >= 0 and buf.find(_ESC, at + 1) < 0 and buf.rfind(_ESC, 0, at) < 0:
                found = _MARKER.match(buf, at)
                if found is not None and found.end() - at - 3 <= self._max_escape_bytes:
                    return self._one_marker(buf, at, found.end())
        elided = 0
        if self._held:
            buf = self._held + buf
            elided = self._held_elided
            self._held = b""
            self._held_elided = 0
        end = len(buf)
        last_esc = buf.rfind(_ESC)
        if last_esc >= 0:
            start = self._open_start(buf, last_esc)
            if start >= 0:
                self._hold(buf, start, elided if start == 0 else 0)
                end = start
        if last_esc < 0 or _MARKER_HINT not in buf:
            text = self._emit(buf[:end] if end < len(buf) else buf)
            self._note_text(text)
            return Chunk(text=text)
        return self._feed_with_markers(buf, end, elided)

    def _one_marker(self, buf: bytes, start: int, end: int) -> Chunk:
        """:meth:`_feed_with_markers` for a piece whose only escape is one whole marker
        at ``buf[start:end]``: the same text, marker and tail, with less work."""
        terminator = 1 if buf[end - 1] == 0x07 else 2
        body = buf[start + _MARKER_BODY_START : end - terminator]
        before = self._emit(buf[:start]) if start else ""
        marker = Marker(exit_code=_exit_code(body, len(body)), text_offset=len(before))
        self._cr_before_marker = self._cr_ends_line = self._pending_cr
        after = self._emit(buf[end:]) if end < len(buf) else ""
        self._last_exit_code = marker.exit_code
        self._tail = ""
        self._note_text(after)
        return Chunk(text=before + after, markers=(marker,))

    def flush(self) -> Chunk:
        """End the stream: emit a held CR as LF and a partial character as U+FFFD.

        An escape sequence still open is discarded. The sanitizer is then back at the
        start of a stream (markers and the prompt tail are kept) and may be fed again.
        """
        self._held = b""
        self._held_elided = 0
        text = ""
        if self._pending_cr:
            self._pending_cr = self._cr_ends_line = False
            text = self._decoder.decode(b"\n")
        text += self._decoder.decode(b"", final=True)
        self._decoder.reset()
        self._note_text(text)
        return Chunk(text=text)

    def _feed_with_markers(self, buf: bytes, end: int, elided: int) -> Chunk:
        parts: list[str] = []
        length = 0
        markers: list[Marker] = []
        segment_start = 0
        for match in _MARKER.finditer(buf, 0, end):
            terminator = 1 if buf[match.end() - 1] == 0x07 else 2
            body = buf[match.start() + _MARKER_BODY_START : match.end() - terminator]
            body_len = len(body) + (elided if match.start() == 0 else 0)
            if body_len > self._max_escape_bytes:
                continue
            piece = self._emit(buf[segment_start : match.start()])
            parts.append(piece)
            length += len(piece)
            markers.append(Marker(exit_code=_exit_code(body, body_len), text_offset=length))
            self._cr_before_marker = self._cr_ends_line = self._pending_cr
            segment_start = match.end()
        piece = self._emit(buf[segment_start:end])
        parts.append(piece)
        text = "".join(parts)
        if markers:
            self._last_exit_code = markers[-1].exit_code
            self._tail = ""
            self._note_text(text[markers[-1].text_offset :])
        else:
            self._note_text(text)
        return Chunk(text=text, markers=tuple(markers))

    @staticmethod
    def _open_start(buf: bytes, last_esc: int) -> int:
        """Return where a sequence left open by the end of ``buf`` starts, or -1."""
        if last_esc == len(buf) - 1:
            # A final ESC may be the first half of the ST closing an open string.
            previous = buf.rfind(_ESC, 0, last_esc)
            if previous >= 0 and _OPEN.fullmatch(buf, previous) is not None:
                return previous
            return last_esc
        if _OPEN.fullmatch(buf, last_esc) is not None:
            return last_esc
        return -1

    def _hold(self, buf: bytes, start: int, elided: int) -> None:
        """Carry the open sequence at ``buf[start:]``, keeping only what decides its fate.

        Parameter and intermediate bytes cannot change how a CSI or an escape ends, and a
        string body matters only for a short marker, so the carry stays a few bytes long
        however long the sequence runs.
        """
        kind = buf[start + 1 : start + 2]
        if kind == b"[" or (kind and kind not in b"]PX^_"):
            self._held = buf[start : start + 2]
            return
        if not kind:
            self._held = _ESC
            return
        body_end = len(buf)
        closing = b""
        if body_end - start > 2 and buf[body_end - 1] == 0x1B:
            body_end -= 1
            closing = _ESC
        body_start = start + 2
        kept_end = min(body_end, body_start + _MARKER_BODY_MAX)
        self._held = buf[start:kept_end] + closing
        self._held_elided = elided + (body_end - kept_end)

    def _emit(self, raw: bytes) -> str:
        """Strip sequences and controls from complete bytes, normalise CR, and decode."""
        data = _SEQUENCE.sub(b"", raw) if _ESC in raw else raw
        if not self._pending_cr and not data.endswith(_CR) and _LONE_CR.search(data) is None:
            # Every CR is the first half of a CRLF (the usual terminal line end): removing
            # controls cannot part a pair, so deleting the CRs with the controls in one
            # pass gives what the general path below gives.
            data = data.translate(None, _DROPPED_AND_CR)
            if data.isascii() and not self._decoder.buffer:
                return data.decode("ascii")  # what the decoder gives, without its layers
            return self._decoder.decode(data)
        data = data.translate(None, _DROPPED)
        if not data:
            return ""  # a held CR stays held: the byte that decides it is still to come
        if self._pending_cr:
            self._pending_cr = False
            if self._cr_ends_line:
                # Held when a prompt marker came: it ended the line before the prompt.
                data = data.lstrip(_CR)
                if not data:
                    self._pending_cr = True  # still held: only CRs came yet
                    return ""
                self._cr_ends_line = False
                if not data.startswith(b"\n"):
                    data = b"\n" + data
            else:
                data = _CR + data
        if data.endswith(_CR):
            # Held until the next byte says whether it ends the line (CRLF) or returns
            # to its start; a run of CRs is one return.
            self._pending_cr = True
            data = data.rstrip(_CR)
        if _CR in data:
            data = _CRS.sub(_CR, _CRS_LF.sub(b"\n", data))
        return self._decoder.decode(data)

    def _note_text(self, text: str) -> None:
        if self._tail is None or not text:
            return
        if self._cr_before_marker:
            self._cr_before_marker = False
            if text.startswith("\n"):
                text = text[1:]
        self._tail = (self._tail + text[-PROMPT_TAIL_CHARS:])[-PROMPT_TAIL_CHARS:]
