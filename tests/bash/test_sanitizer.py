"""Streaming sanitizer: escapes, markers, CR, UTF-8, bounds, and split invariance.

The property tests compare the sanitizer with a byte-at-a-time state machine written
from the documented grammar, and every chunked run with the same stream fed whole.
"""

from __future__ import annotations

import codecs
import re
import time
import tracemalloc
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_terminal_bash.sanitizer as sanitizer_module
from dsh_terminal_bash.sanitizer import MARKER_PREFIX, PROMPT_TAIL_CHARS, Chunk, Sanitizer
from dsh_terminal_core.registry.overstrike import render

MARK = MARKER_PREFIX.encode()

# -- reference model ---------------------------------------------------------------------


def reference(
    data: bytes, max_escape_bytes: int = 256 * 1024
) -> tuple[str, list[tuple[int | None, int]]]:
    """Sanitize ``data`` whole, one byte at a time; markers as (exit code, text offset)."""
    ground, escape, csi, string, string_esc = range(5)
    stripped = bytearray()
    found: list[tuple[int | None, int]] = []
    state = ground
    intermediates = False
    body = bytearray()
    osc = False

    def finish() -> None:
        if not osc or len(body) > max_escape_bytes:
            return
        if body != b"133;D" and not body.startswith(b"133;D;"):
            return
        code: int | None = None
        field = bytes(body[6:]).split(b";")[0]
        if len(body) <= 64 and re.fullmatch(rb"-?[0-9]{1,10}", field):
            code = int(field)
        found.append((code, len(stripped)))

    i = 0
    while i < len(data):
        b = data[i]
        if state == ground:
            if b == 0x1B:
                state, intermediates = escape, False
            elif b in (0x08, 0x09, 0x0A, 0x0D) or (b >= 0x20 and b != 0x7F):
                stripped.append(b)
        elif state == escape:
            if b == 0x5B and not intermediates:
                state = csi
            elif b in b"]PX^_" and not intermediates:
                state, body, osc = string, bytearray(), b == 0x5D
            elif 0x20 <= b <= 0x2F:
                intermediates = True
            elif 0x30 <= b <= 0x7E:
                state = ground
            else:
                state = ground
                continue
        elif state == csi:
            if 0x40 <= b <= 0x7E:
                state = ground
            elif not 0x20 <= b <= 0x3F:
                state = ground
                continue
        elif state == string:
            if b == 0x07:
                finish()
                state = ground
            elif b in (0x18, 0x1A):
                state = ground
            elif b == 0x1B:
                state = string_esc
            else:
                body.append(b)
        else:  # string_esc
            if b == 0x5C:
                finish()
                state = ground
            else:
                state, intermediates = escape, False
                continue
        i += 1

    # Line ends between the markers: CRLF and CR-CR-LF end a line, another CR run returns
    # to the line's start (one CR), a run the stream ends on is flushed as a newline, and
    # a run right before a marker ends the line there (the prompt starts its own), its
    # newline coming with the first byte after the marker that is not a CR.
    raw = bytes(stripped)
    cuts = [pos for _, pos in found]
    segments = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    out = b""
    offsets: list[int] = []
    pending = ends_line = False
    for index, segment in enumerate(segments):
        data = segment
        if pending and data:
            if ends_line:
                data = data.lstrip(b"\r")
                if data:
                    pending = ends_line = False
                    data = data if data.startswith(b"\n") else b"\n" + data
            else:
                pending = False
                data = b"\r" + data
        if data.endswith(b"\r"):
            pending = True
            data = data.rstrip(b"\r")
        out += re.sub(rb"\r+", b"\r", re.sub(rb"\r+\n", b"\n", data))
        if index < len(found):
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            offsets.append(len(decoder.decode(out)))
            ends_line = pending
    if pending:
        out += b"\n"
    text = out.decode("utf-8", "replace")
    markers = [(code, offset) for (code, _), offset in zip(found, offsets, strict=True)]
    return text, markers


def run(
    chunks: Iterable[bytes], sanitizer: Sanitizer | None = None
) -> tuple[str, list[tuple[int | None, int]]]:
    """Feed ``chunks`` then flush; markers with offsets made absolute."""
    s = sanitizer or Sanitizer()
    parts: list[str] = []
    markers: list[tuple[int | None, int]] = []
    done = 0

    def take(chunk: Chunk) -> None:
        nonlocal done
        markers.extend((m.exit_code, done + m.text_offset) for m in chunk.markers)
        parts.append(chunk.text)
        done += len(chunk.text)

    for piece in chunks:
        take(s.feed(piece))
    take(s.flush())
    return "".join(parts), markers


def split_at(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    pieces, last = [], 0
    for p in [*points, len(data)]:
        pieces.append(data[last:p])
        last = p
    return pieces


def every_split(data: bytes) -> Iterable[list[bytes]]:
    """The stream whole, cut once at every position, and one byte at a time."""
    yield [data]
    for i in range(len(data) + 1):
        yield [data[:i], data[i:]]
    yield [data[i : i + 1] for i in range(len(data))]


def assert_all_splits(data: bytes, text: str, exit_codes: list[int | None] | None = None) -> None:
    whole = run([data])
    assert whole[0] == text
    if exit_codes is not None:
        assert [code for code, _ in whole[1]] == exit_codes
    for chunks in every_split(data):
        assert run(chunks) == whole, chunks


# -- escapes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"a\x1b[31mred\x1b[0mb", "aredb"),
        (b"\x1b[?2004h\x1b[1;31;42mx\x1b[K", "x"),
        (b"\x1b[ q<", "<"),  # intermediate before the final byte
        (b"\x1b[12\x80z", "\ufffdz"),  # CSI ended early: the byte is read as input
        (b"a\x1b]0;title\x07b", "ab"),
        (b"a\x1b]0;title\x1b\\b", "ab"),
        (b"a\x1bPq#0;2;0\x1b\\b", "ab"),  # DCS
        (b"a\x1b_apc\x07b", "ab"),
        (b"a\x1b]0;t\x18b", "ab"),  # CAN aborts a string
        (b"a\x1b]0;t\x1b[1mb", "ab"),  # ESC aborts a string and starts the next sequence
        (b"\x1b=\x1b>\x1b7\x1b8x", "x"),
        (b"\x1b(B\x1b)0\x1b#8x", "x"),
        (b"a\x1b\x1b[mb", "ab"),
        (b"a\x1b\nb", "a\nb"),  # ESC ended early by a control
        (b"a\x9b31mb", "a\ufffd31mb"),  # 8-bit C1 is not a control in UTF-8
    ],
)
def test_escapes_are_stripped_at_every_split(data: bytes, text: str) -> None:
    assert_all_splits(data, text, [])


def test_controls_are_dropped_but_tab_newline_and_backspace_kept() -> None:
    data = b"a\x00b\x07c\x08d\te\x0bf\x0cg\x7fh\x01\x1fi\n"
    assert_all_splits(data, "abc\bd\tefghi\n")


# -- markers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"133;D;0", 0),
        (b"133;D;127", 127),
        (b"133;D;-1", -1),
        (b"133;D;1;aid=42", 1),
        (b"133;D", None),
        (b"133;D;", None),
        (b"133;D;x", None),
        (b"133;D;12345678901", None),
    ],
)
def test_marker_exit_codes(body: bytes, code: int | None) -> None:
    for terminator in (b"\x07", b"\x1b\\"):
        data = b"out\n\x1b]" + body + terminator + b"dsh> "
        assert_all_splits(data, "out\ndsh> ", [code])
        assert run([data])[1] == [(code, 4)]


def test_similar_osc_is_not_a_marker() -> None:
    assert_all_splits(b"\x1b]133;A\x07\x1b]133;Dx\x07\x1b]1133;D;0\x07ok", "ok", [])


def test_marker_offset_and_prompt_tail() -> None:
    s = Sanitizer()
    assert s.prompt_tail is None and s.last_marker_exit_code is None
    chunk = s.feed(b"hello\r\n" + MARK + b"3\x07dsh> ")
    assert chunk.text == "hello\ndsh> "
    assert [(m.exit_code, m.text_offset) for m in chunk.markers] == [(3, 6)]
    assert s.prompt_tail == "dsh> " and s.last_marker_exit_code == 3
    s.feed(b"echo hi\r\n")
    assert s.prompt_tail == "dsh> echo hi\n"
    s.feed(MARK + b"0\x07")
    assert s.prompt_tail == "" and s.last_marker_exit_code == 0
    s.feed(b"dsh> ")
    assert s.prompt_tail == "dsh> "


def test_prompt_tail_is_bounded() -> None:
    s = Sanitizer()
    s.feed(MARK + b"0\x07")
    for _ in range(100):
        s.feed(b"x" * 1000)
    tail = s.prompt_tail
    assert tail is not None and len(tail) == PROMPT_TAIL_CHARS


def test_several_markers_in_one_chunk_keep_order() -> None:
    data = MARK + b"1\x07a" + MARK + b"2\x1b\\b\r" + MARK + b"3\x07\nc"
    text, markers = run([data])
    assert text == "ab\nc"
    assert markers == [(1, 0), (2, 1), (3, 2)]
    assert_all_splits(data, "ab\nc", [1, 2, 3])


def test_marker_after_stray_string_introducer_is_found() -> None:
    data = b"bin\x1b]garbage without end " * 3 + MARK + b"0\x07dsh> "
    assert_all_splits(data, "bindsh> ", [0])


def test_marker_longer_than_bound_is_discarded() -> None:
    data = b"a" + MARK + b"0;" + b"p" * 100 + b"\x07b"
    assert run([data], Sanitizer(max_escape_bytes=64)) == ("ab", [])
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    assert run(chunks, Sanitizer(max_escape_bytes=64)) == ("ab", [])
    assert run([data], Sanitizer(max_escape_bytes=200)) == ("ab", [(None, 1)])


# -- CR and newlines -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"a\r\nb\r\n", "a\nb\n"),
        (b"a\rb", "a\rb"),  # a return to the line's start, applied by the reader
        (b"a\r\r\nb", "a\nb"),  # CR-CR-LF ends one line, as a terminal shows it
        (b"a\r\r\rb", "a\rb"),  # a run of returns is one
        (b"a\n\rb", "a\n\rb"),
        (b"\rX 0%\r\rX Done\r\r\n", "\rX 0%\rX Done\n"),  # apt's progress
        (b"a\r\x1b[K\nb", "a\nb"),  # judged with escapes removed
        (b"a\r", "a\n"),  # a CR at the end of the stream is emitted by flush
        (b"\r<long command tail", "\r<long command tail"),
    ],
)
def test_carriage_returns_end_lines_or_return(data: bytes, text: str) -> None:
    assert_all_splits(data, text)


def test_split_crlf_is_one_newline() -> None:
    s = Sanitizer()
    assert s.feed(b"line\r").text == "line"
    assert s.feed(b"").text == ""
    assert s.feed(b"\x1b[0m").text == ""
    assert s.feed(b"\nnext").text == "\nnext"
    assert s.flush().text == ""


# -- UTF-8 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("char", ["é", "€", "𝄞", "日"])
def test_multibyte_split_at_every_byte(char: str) -> None:
    data = ("a" + char + "b" + char).encode()
    assert_all_splits(data, "a" + char + "b" + char)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"a\xffb", "a\ufffdb"),
        (b"a\xc3(b", "a\ufffd(b"),
        (b"a\xe2\x82", "a\ufffd"),  # truncated at the end of the stream
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # encoded surrogate
        (b"\xc3\x1b[m\xa9", "é"),  # decoded after escapes are removed
    ],
)
def test_invalid_utf8_becomes_replacement(data: bytes, text: str) -> None:
    assert_all_splits(data, text)


# -- bounds --------------------------------------------------------------------------------


def test_unterminated_string_is_bounded_and_discarded_through_its_end() -> None:
    s = Sanitizer(max_escape_bytes=1024)
    out = [s.feed(b"before\x1b]0;").text]
    tracemalloc.start()
    try:
        for _ in range(320):
            out.append(s.feed(b"t" * 65536).text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    out.append(s.feed(b"x\x07after").text)
    out.append(s.flush().text)
    assert "".join(out) == "beforeafter"
    assert peak < 4 * 65536  # 20 MB of body never accumulated


def test_unterminated_sequence_at_end_of_stream_is_dropped() -> None:
    for tail in (b"\x1b", b"\x1b[12;", b"\x1b]0;tit", b"\x1b]0;t\x1b", b"\x1b(", MARK + b"0"):
        assert run([b"ok" + tail]) == ("ok", [])
        assert run([b"ok", tail]) == ("ok", [])


def test_sanitizer_can_continue_after_flush() -> None:
    s = Sanitizer()
    s.feed(b"a\r")
    assert s.flush().text == "\n"
    assert s.feed(b"\nb").text == "\nb"


def test_rejects_non_positive_bound() -> None:
    with pytest.raises(ValueError):
        Sanitizer(max_escape_bytes=0)


def test_accepts_bytearray_and_memoryview() -> None:
    s = Sanitizer()
    assert s.feed(bytearray(b"a\x1b[m")).text == "a"
    assert s.feed(memoryview(b"b\r\n")).text == "b\n"


# -- properties ----------------------------------------------------------------------------

# Single bytes and short runs that make escapes, markers, CRs and split characters likely.
TOKENS = [
    bytes([b]) for b in b"\x1b[]\\\x07\r\n0;a(BP_ m\x18\x1a\t\x00\x08\x7f\x9b\xc3\xa9\xac\xff"
]
TOKENS += [b"\r\n", b"133;D;", b"133;D", b"17", b"dsh> ", b"\xe2\x82", b"\xf0\x9d", MARK]
MARKERS = [MARK + b"0\x07", MARK + b"42\x1b\\", b"\x1b]133;D\x07", MARK + b"x\x07", MARK + b"1;"]
heavy = st.lists(st.one_of(st.sampled_from(TOKENS), st.sampled_from(MARKERS)), max_size=60).map(
    b"".join
)
streams = st.one_of(heavy, st.binary(max_size=200))


@settings(max_examples=400, deadline=None)
@given(streams)
def test_matches_reference_model(data: bytes) -> None:
    assert run([data]) == reference(data)


@settings(max_examples=150, deadline=None)
@given(heavy, st.integers(min_value=1, max_value=40))
def test_matches_reference_with_small_escape_bound(data: bytes, bound: int) -> None:
    assert run([data], Sanitizer(max_escape_bytes=bound)) == reference(data, bound)
    chunks = [data[i : i + 3] for i in range(0, len(data), 3)]
    assert run(chunks, Sanitizer(max_escape_bytes=bound)) == reference(data, bound)


@settings(max_examples=400, deadline=None)
@given(streams, st.lists(st.integers(min_value=0, max_value=200), max_size=12))
def test_any_split_gives_the_same_text_and_markers(data: bytes, cuts: list[int]) -> None:
    whole = run([data])
    assert run(split_at(data, cuts)) == whole
    assert run([data[i : i + 1] for i in range(len(data))]) == whole


# Terminal output as a fast program writes it: lines ended by CRLF, now and then a lone CR,
# LF, control, escape or marker, so some chunks are plain CRLF text and others are not.
_LINE_BITS = [b"line", b"42", b"\xc3\xa9", b"\xe2\x82", b"\t", b" ", b"\x07", b"\x1b[1m", b"\xff"]
_LINE_ENDS = [b"\r\n"] * 8 + [b"\n", b"\r", b"\r\x07\n", b"\r\r\n", b"\r\x1b[K\n", *MARKERS]
crlf_lines = st.lists(
    st.tuples(
        st.lists(st.sampled_from(_LINE_BITS), max_size=4).map(b"".join),
        st.sampled_from(_LINE_ENDS),
    ).map(b"".join),
    max_size=40,
).map(b"".join)


def run_general(chunks: Sequence[bytes], patch: pytest.MonkeyPatch) -> tuple[object, ...]:
    """What the general CR path alone makes of ``chunks``: text, markers, tail, exit code."""
    with patch.context() as inner:
        # Every byte counts as a lone CR, so no chunk counts as plain CRLF text.
        inner.setattr(sanitizer_module, "_LONE_CR", re.compile(rb"(?s:.)|\Z"))
        s = Sanitizer()
        result = run(chunks, s)
    return (*result, s.prompt_tail, s.last_marker_exit_code)


@settings(max_examples=400, deadline=None)
@given(crlf_lines, st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_crlf_fast_path_matches_the_general_path(data: bytes, cuts: list[int]) -> None:
    chunks = split_at(data, cuts)
    with pytest.MonkeyPatch.context() as patch:
        expected = run_general(chunks, patch)
    s = Sanitizer()
    got = run(chunks, s)
    assert (*got, s.prompt_tail, s.last_marker_exit_code) == expected
    assert got == reference(data)


def test_crlf_fast_path_is_taken_and_keeps_a_split_crlf() -> None:
    s = Sanitizer()
    assert s.feed(b"1\r\n2\r\n3\r").text == "1\n2\n3"
    assert s.feed(b"\n4\r\n\x075\r\n").text == "\n4\n5\n"
    assert s.feed(b"6\r7\r\n").text == "6\r7\n"
    assert s.flush().text == ""


@settings(max_examples=200, deadline=None)
@given(streams)
def test_output_is_clean_text(data: bytes) -> None:
    text, _ = run([data])
    text.encode()  # valid UTF-8, no surrogates
    assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert "\r\n" not in text and "\r\r" not in text
    assert "\b" not in render(text) and "\r" not in render(text)  # what a reader gets


# -- cost ----------------------------------------------------------------------------------


def _best_time(data: bytes, chunk: int) -> float:
    best = float("inf")
    for _ in range(3):
        s = Sanitizer()
        start = time.perf_counter()
        for i in range(0, len(data), chunk):
            s.feed(data[i : i + chunk])
        s.flush()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize(
    "unit",
    [
        b"x" * 64,  # one long line without a newline
        b"0123456789\r\n",
        b"\x1b[1;31mred\x1b[0m \xc3\xa9\r\n",
    ],
)
def test_cost_is_linear(unit: bytes) -> None:
    small = unit * (2_500_000 // len(unit))
    large = unit * (10_000_000 // len(unit))
    ratio = _best_time(large, 4096) / _best_time(small, 4096)
    assert ratio < 10, ratio  # linear is about 4; quadratic would be about 16


def test_long_open_string_costs_linear_time() -> None:
    small = b"\x1b]0;" + b"t" * 2_500_000
    large = b"\x1b]0;" + b"t" * 10_000_000
    ratio = _best_time(large, 4096) / _best_time(small, 4096)
    assert ratio < 10, ratio


@pytest.mark.parametrize("pad", [55, 56, 57, 58, 59, 60, 200])
@pytest.mark.parametrize("bound", [63, 64, 65, 66, 1000])
def test_long_marker_bodies_near_the_limits(pad: int, bound: int) -> None:
    data = b"a" + MARK + b"7;" + b"p" * pad + b"\x1b\\b" + MARK + b"5" + b";" * pad + b"\x07c"
    expected = reference(data, bound)
    for size in (1, 2, 5, 13, 64, 70, len(data)):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        assert run(chunks, Sanitizer(max_escape_bytes=bound)) == expected, size


@pytest.mark.parametrize(
    "data",
    [
        b"x\r" + MARK + b"3\x07dsh> ",  # printf 'x\r' right before the prompt
        b"\r:q\r\x1b[40;1H  \r" + MARK + b"0\x07dsh> ",  # what vim prints as it quits
    ],
)
def test_lone_cr_before_a_marker_leaves_exactly_the_prompt_as_tail(data: bytes) -> None:
    for cut in range(len(data) + 1):
        s = Sanitizer()
        s.feed(data[:cut])
        s.feed(data[cut:])
        assert s.prompt_tail == "dsh> ", cut
