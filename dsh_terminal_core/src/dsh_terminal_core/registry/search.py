"""Searching a session's retained lines: one engine that never backtracks, line by line.

``terminal_search`` and ``ctx.terminals.search`` answer "which retained lines match?"
over a :class:`~.types.RetainedLines` snapshot. The engine is RE2 (``google-re2``),
whose matching time is linear in the text whatever the pattern, so a pattern such as
``(a+)+$`` is answered at once and correctly instead of being stopped. The factor of
that line grows with the pattern, so a search in a worker thread is still given
:data:`SEARCH_BUDGET_S` and stopped past it (``INVALID_ARGUMENT``), checked between
chunks: no look at the pattern decides it. A literal is RE2's ``literal`` mode, which
finds it with ``memchr``: on 12 MB here 3x faster than ``str.find``.

Lines are matched on their own: the text is searched a chunk at a time with RE2's
``never_nl`` (no match contains a newline) and multi-line ``^``/``$``, and after a match
the search goes on from the next line, so each line is reported once and a pattern that
matches the empty string costs one call per line it matches, not one per position.
Chunks are searched newest first, and the search stops once more lines matched than
are kept: a build's last errors are found without reading its whole log.

:func:`search_retained` is a pure function of the snapshot, so :func:`search_session`
runs it in a worker thread of its own (RE2 releases the GIL while it matches) unless it
is a literal over a small snapshot; :func:`compile_search` checks the pattern first, on
the caller's side, so a bad one is ``INVALID_ARGUMENT`` before anything else happens.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import re2

from ..kernel.errors import InvalidArgument, TerminalError
from ..kernel.resultcap import MAX_RESULT_BYTES
from ..kernel.textbounds import utf8_head, utf8_len
from .linematch import MAX_PATTERN_CHARS
from .overstrike import render
from .types import (
    MIN_REQUEST_BYTES,
    BackendSession,
    RetainedLines,
    SearchableSession,
    SearchMatch,
    SearchRequest,
    SearchResult,
)

__all__ = [
    "DEFAULT_MATCHES",
    "MAX_CONTEXT",
    "MAX_LINE_CHARS",
    "MAX_MATCHES",
    "SEARCH_BUDGET_S",
    "CompiledSearch",
    "compile_search",
    "retained_chars",
    "search_retained",
    "search_session",
]

MAX_CONTEXT = 5
"""Most context lines asked for on each side of a match."""

DEFAULT_MATCHES = 50
MAX_MATCHES = 200
"""Most matches one search returns: a page a model reads, not an export."""

MAX_LINE_CHARS = 500
"""Longest line shown whole; a longer one is shown as this many characters around its
match (a context line: its head), ``…`` marking each cut."""

_CUT = "…"

_MATCH_FRAME = 64
"""Bytes charged for each match beyond its line's text: its number and the separators of
the rendered text, or the keys and punctuation of its JSON value, whichever is more."""

_LINE_FRAME = 12
"""Bytes charged for each context line beyond its text, reckoned the same way."""

_CHUNK_CHARS = 64 * 1024
"""Segments are searched in chunks of about this many characters: few enough calls over
a long history, little work past the newest matches once enough were found."""

_INLINE_CHARS = 256 * 1024
"""Below this many retained characters a literal is searched before the loop's next turn
(a fraction of a millisecond); a longer text, or a regular expression, in a worker thread,
so no search stalls the loop."""

SEARCH_BUDGET_S = 0.9
"""How long a search may run. RE2's time is linear in the text, but its factor grows
with the pattern: one whose automaton has too many states for RE2's cache (many
overlapping bounded repetitions, ``[ab]*a[ab]{20}c``) falls back to simulating the NFA,
about 0.3 s per MB here. Stopped after this long, it is ``INVALID_ARGUMENT`` within 1 s."""

_WORKERS = 4

_ENCODING = "utf-8"
_ERRORS = "surrogatepass"


async def search_session(
    session: BackendSession, session_id: str, request: SearchRequest
) -> SearchResult:
    """Search an authorized session's retained lines (``ctx.terminals.search``).

    A bad request is ``INVALID_ARGUMENT`` (:func:`compile_search`, and ``max_bytes``
    below 1,024), a session whose backend does not implement :class:`SearchableSession`
    ``UNSUPPORTED``. The lines are a snapshot taken now, on the loop. A small snapshot
    searched for a literal is answered before the loop's next turn; anything else runs
    in a worker thread, so the loop never waits for it, and a search that has not
    finished after :data:`SEARCH_BUDGET_S` is stopped with ``INVALID_ARGUMENT``.
    """
    compiled = compile_search(request)
    bound = request.max_bytes
    if bound is not None and (
        isinstance(bound, bool) or not isinstance(bound, int) or bound < MIN_REQUEST_BYTES
    ):
        raise InvalidArgument(f"max_bytes must be an integer >= {MIN_REQUEST_BYTES} or None")
    if not isinstance(session, SearchableSession):
        raise TerminalError(
            f"session {session_id} cannot be searched: its backend session "
            f"({type(session).__name__}) does not provide retained_lines()",
            "UNSUPPORTED",
        )
    retained = session.retained_lines()
    if not request.regex and retained_chars(retained) <= _INLINE_CHARS:
        return search_retained(retained, compiled, request)
    stop = threading.Event()
    loop = asyncio.get_running_loop()
    work = loop.run_in_executor(_executor(), search_retained, retained, compiled, request, stop)
    try:
        return await asyncio.wait_for(work, SEARCH_BUDGET_S)
    except TimeoutError:
        lines = retained.line_end - retained.line_begin
        raise InvalidArgument(
            f"the pattern did not finish searching {lines} lines within {SEARCH_BUDGET_S:g} s "
            "and was stopped: RE2 keeps to time linear in the text, but this pattern costs "
            "too much per character (many overlapping repetitions); search for something "
            "more specific, a literal part of the line if you can"
        ) from None
    finally:
        stop.set()  # a search still running stops at its next chunk


_pool: concurrent.futures.ThreadPoolExecutor | None = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    """The searches' own threads, so a slow one never holds the loop's default executor."""
    global _pool
    if _pool is None:
        _pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=_WORKERS, thread_name_prefix="dsh-search"
        )
    return _pool


class _Stopped(Exception):
    """The caller stopped waiting; what is left of the search is not wanted."""


@attrs.frozen
class CompiledSearch:
    """A checked pattern, compiled once for the bytes of the retained text."""

    regexp: Any  # re2's compiled pattern; the binding has no type stubs


def compile_search(request: SearchRequest) -> CompiledSearch:
    """Check ``request`` and compile its pattern; ``INVALID_ARGUMENT`` saying what is wrong.

    Checked: the pattern is a non-empty string of at most 1,000 characters without a line
    break, valid RE2 syntax when ``regex``; ``regex`` and ``ignore_case`` are booleans;
    ``context`` is an integer in 0..5 and ``max_matches`` in 1..200.
    """
    if not isinstance(request, SearchRequest):
        raise InvalidArgument("expected a SearchRequest")
    pattern = request.pattern
    if not isinstance(pattern, str):
        raise InvalidArgument("pattern must be a string")
    if not pattern:
        raise InvalidArgument("pattern must not be empty: it would match every line")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidArgument(
            f"pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are allowed"
        )
    if "\n" in pattern or "\r" in pattern:
        raise InvalidArgument(
            "pattern must not contain a line break: each line is searched on its own"
        )
    for name in ("regex", "ignore_case"):
        if not isinstance(getattr(request, name), bool):
            raise InvalidArgument(f"{name} must be a boolean")
    _check_count("context", request.context, 0, MAX_CONTEXT)
    _check_count("max_matches", request.max_matches, 1, MAX_MATCHES)
    try:
        source = pattern.encode(_ENCODING)
    except UnicodeEncodeError:
        raise InvalidArgument("pattern is not valid Unicode (a lone surrogate)") from None
    options = re2.Options()
    options.never_nl = True
    options.never_capture = True
    options.log_errors = False
    options.case_sensitive = not request.ignore_case
    options.literal = not request.regex
    regexp = _compile(source, options)
    if request.regex:
        # ^ and $ at each line's start and end; compiled bare first, so that an error
        # quotes the pattern as it was given.
        regexp = _compile(b"(?m)" + source, options)
    return CompiledSearch(regexp)


def _compile(source: bytes, options: Any) -> Any:
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode(_ENCODING, "replace")
        raise InvalidArgument(
            "pattern is not a valid regular expression (RE2 syntax, which has no "
            f"backreferences or lookaround): {detail}"
        ) from None


def _check_count(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}")


def retained_chars(retained: RetainedLines) -> int:
    """How many characters the snapshot holds: what a search of it has to read."""
    return sum(len(text) for _, text in retained.segments)


class _Chunk:
    """Whole lines, encoded (and rendered) when first read, numbered when first asked.

    The first line's number is ``base`` plus the newlines in ``source[:cut]``: a chunk
    cut out of a large segment counts the lines before it only once one of its lines is
    reported, so a search that finds nothing there never counts them.
    """

    __slots__ = ("_base", "_cut", "_data", "_first", "_overstruck", "_source", "_text", "index")

    def __init__(
        self, index: int, text: str, overstruck: bool, base: int, source: str = "", cut: int = 0
    ) -> None:
        self.index = index  # its place among the chunks, newest first
        self._text = text
        self._overstruck = overstruck
        self._base = base
        self._source = source
        self._cut = cut
        self._first: int | None = None if cut else base
        self._data: bytes | None = None

    @property
    def first(self) -> int:
        """The number of the chunk's first line."""
        if self._first is None:
            self._first = self._base + self._source.count("\n", 0, self._cut)
        return self._first

    @property
    def data(self) -> bytes:
        """The lines as the UTF-8 bytes RE2 reads, each followed by a newline."""
        if self._data is None:
            text = render(self._text) if self._overstruck else self._text
            self._data = text.encode(_ENCODING, _ERRORS)
        return self._data


class _Chunks:
    """The snapshot's lines as chunks of about :data:`_CHUNK_CHARS`, newest first.

    Made only as far as the search and its context lines reach. Small segments are
    gathered into one chunk; a large one is cut at line starts, newest part first.
    """

    def __init__(self, retained: RetainedLines) -> None:
        self._made: list[_Chunk] = []
        self._source = self._newest_first(retained)

    def __iter__(self) -> Iterator[_Chunk]:
        index = 0
        while index < len(self._made) or self._make():
            yield self._made[index]
            index += 1

    def older(self, chunk: _Chunk) -> _Chunk:
        """The chunk before ``chunk``; it exists (the lines asked for are retained)."""
        if chunk.index + 1 == len(self._made) and not self._make():
            raise IndexError("no chunk is older than the oldest")
        return self._made[chunk.index + 1]

    def newer(self, chunk: _Chunk) -> _Chunk:
        """The chunk after ``chunk``, made before it."""
        return self._made[chunk.index - 1]

    def _make(self) -> bool:
        chunk = next(self._source, None)
        if chunk is None:
            return False
        self._made.append(chunk)
        return True

    @staticmethod
    def _newest_first(retained: RetainedLines) -> Iterator[_Chunk]:
        overstruck = retained.overstruck
        index = 0
        pending: list[str] = []  # small segments, newest first
        pending_first = 0
        size = 0
        for first, text in reversed(retained.segments):
            if not text:
                continue
            if len(text) < _CHUNK_CHARS:
                pending.append(text)
                pending_first = first
                size += len(text)
                if size < _CHUNK_CHARS:
                    continue
            if pending:
                yield _Chunk(index, "".join(reversed(pending)), overstruck, pending_first)
                index += 1
                pending, size = [], 0
                if len(text) < _CHUNK_CHARS:
                    continue
            stop = len(text)
            while stop:
                cut = text.rfind("\n", 0, max(stop - _CHUNK_CHARS, 0)) + 1
                yield _Chunk(index, text[cut:stop], overstruck, first, text, cut)
                index += 1
                stop = cut
        if pending:
            yield _Chunk(index, "".join(reversed(pending)), overstruck, pending_first)


# A matching line: its number, where it begins and ends in its chunk's data, and where
# the match is in it. Plain tuples: a chunk where every line matches makes many.
_Hit = tuple[int, int, int, int, int]


def search_retained(
    retained: RetainedLines,
    compiled: CompiledSearch,
    request: SearchRequest,
    stop: threading.Event | None = None,
) -> SearchResult:
    """The newest matching lines of ``retained``, oldest first, within ``request.max_bytes``.

    Pure and thread-safe: the snapshot is never changed. The newest match is always
    kept, cut to the budget if it alone exceeds it. Once ``stop`` is set the search ends
    at its next chunk, raising an exception nobody waits for.
    """
    chunks = _Chunks(retained)
    found: list[tuple[_Chunk, _Hit]] = []  # newest first
    for chunk in chunks:
        if stop is not None and stop.is_set():
            raise _Stopped
        found.extend((chunk, hit) for hit in reversed(_hits(compiled, chunk)))
        if len(found) > request.max_matches:
            break
    truncated = len(found) > request.max_matches
    del found[request.max_matches :]
    budget = request.max_bytes if request.max_bytes is not None else MAX_RESULT_BYTES
    lines = _Lines(chunks, retained.line_begin, retained.line_end)
    matches: list[SearchMatch] = []
    for chunk, hit in found:
        match = _shown(chunk, hit, lines, request.context)
        cost = _cost(match)
        if cost > budget:
            if matches:
                truncated = True
                break
            match = _fitted(match, budget)
            cost = budget
        budget -= cost
        matches.append(match)
    matches.reverse()
    return SearchResult(
        matches=tuple(matches),
        line_begin=retained.line_begin + 1,
        line_end=retained.line_end,
        truncated=truncated,
    )


def _hits(compiled: CompiledSearch, chunk: _Chunk) -> list[_Hit]:
    """The chunk's matching lines in line order, one hit per line."""
    data = chunk.data
    size = len(data)
    search = compiled.regexp.search
    find, rfind, count = data.find, data.rfind, data.count
    hits: list[_Hit] = []
    number = -1  # the chunk's first line is numbered once a line of it matched
    counted = 0  # the newlines before this position are counted in ``number``
    pos = 0
    while pos < size:
        match = search(data, pos)
        if match is None:
            break
        start, end = match.span()
        if start >= size:  # the empty "line" after the last newline is no line
            break
        begin = rfind(b"\n", 0, start) + 1
        stop = find(b"\n", start)
        if stop < 0:
            stop = size
        if number < 0:
            number = chunk.first
        number += count(b"\n", counted, begin)
        counted = begin
        hits.append((number, begin, stop, start - begin, min(end, stop) - begin))
        pos = stop + 1
    return hits


class _Lines:
    """Context lines, found from the matching line outward, clipped to what is retained."""

    def __init__(self, chunks: _Chunks, begin: int, end: int) -> None:
        self._chunks = chunks
        self._begin = begin
        self._end = end

    def before(self, chunk: _Chunk, hit: _Hit, context: int) -> tuple[str, ...]:
        """Up to ``context`` lines before the hit's, oldest first, each cut to its head."""
        found: list[str] = []
        pos = hit[1]  # where the line after the one wanted starts
        for _ in range(min(context, hit[0] - self._begin)):
            if pos == 0:
                chunk = self._chunks.older(chunk)
                pos = len(chunk.data)
            data = chunk.data
            start = data.rfind(b"\n", 0, pos - 1) + 1
            found.append(_head(_decode(data[start : pos - 1])))
            pos = start
        found.reverse()
        return tuple(found)

    def after(self, chunk: _Chunk, hit: _Hit, context: int) -> tuple[str, ...]:
        """Up to ``context`` lines after the hit's, each cut to its head."""
        found: list[str] = []
        pos = hit[2] + 1  # where the line wanted starts
        for _ in range(min(context, self._end - 1 - hit[0])):
            if pos >= len(chunk.data):
                chunk = self._chunks.newer(chunk)
                pos = 0
            data = chunk.data
            stop = data.find(b"\n", pos)
            found.append(_head(_decode(data[pos:stop])))
            pos = stop + 1
        return tuple(found)


def _decode(data: bytes) -> str:
    return data.decode(_ENCODING, _ERRORS)


def _head(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + _CUT


def _around(line: str, start: int, end: int) -> str:
    """At most :data:`MAX_LINE_CHARS` of ``line`` around the match ``[start, end)``."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    room = MAX_LINE_CHARS - min(end - start, MAX_LINE_CHARS)
    lo = max(0, start - room // 2)
    hi = min(len(line), lo + MAX_LINE_CHARS)
    lo = max(0, hi - MAX_LINE_CHARS)
    return (_CUT if lo else "") + line[lo:hi] + (_CUT if hi < len(line) else "")


def _shown(chunk: _Chunk, hit: _Hit, lines: _Lines, context: int) -> SearchMatch:
    number, begin, stop, start, end = hit
    data = chunk.data[begin:stop]
    line = _decode(data)
    if len(line) > MAX_LINE_CHARS:
        first = len(_decode(data[:start]))
        line = _around(line, first, first + len(_decode(data[start:end])))
    if not context:
        return SearchMatch(line_number=number + 1, line=line)
    return SearchMatch(
        line_number=number + 1,
        line=line,
        before=lines.before(chunk, hit, context),
        after=lines.after(chunk, hit, context),
    )


def _cost(match: SearchMatch) -> int:
    context = (*match.before, *match.after)
    return (
        _MATCH_FRAME
        + utf8_len(match.line)
        + sum(utf8_len(line) for line in context)
        + _LINE_FRAME * len(context)
    )


def _fitted(match: SearchMatch, budget: int) -> SearchMatch:
    """The newest match cut to ``budget``: its line's head, then context nearest it first."""
    line, _ = utf8_head(match.line, budget - _MATCH_FRAME)
    left = budget - _MATCH_FRAME - utf8_len(line)
    nearest_before = match.before[::-1]
    kept_before: list[str] = []
    kept_after: list[str] = []
    order: list[tuple[list[str], str]] = []
    for index in range(max(len(match.before), len(match.after))):
        if index < len(match.after):
            order.append((kept_after, match.after[index]))
        if index < len(nearest_before):
            order.append((kept_before, nearest_before[index]))
    for kept, text in order:
        cost = utf8_len(text) + _LINE_FRAME
        if cost > left:
            break
        left -= cost
        kept.append(text)
    return attrs.evolve(
        match, line=line, before=tuple(reversed(kept_before)), after=tuple(kept_after)
    )
