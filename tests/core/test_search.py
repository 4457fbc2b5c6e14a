"""Searching retained lines: the engine's rules and ``TerminalSessionService.search``.

Snapshots are written by hand (or by a fake session built on them), so every rule —
one line at a time, the newest kept, context across segments, the size bound, the
checks — is pinned without a shell; tests/tool/test_search.py drives real ones.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_terminal_core.registry.search as search_module
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.errors import DshError
from dsh_terminal_core.kernel.textbounds import utf8_len
from dsh_terminal_core.registry import (
    BackendSpawnContext,
    RetainedLines,
    SearchableSession,
    SearchRequest,
    SearchResult,
    SpawnRequest,
    TerminalSessionService,
)
from dsh_terminal_core.registry.search import (
    MAX_LINE_CHARS,
    compile_search,
    search_retained,
)
from dsh_terminal_core.testing import FakeBackend, FakeSession


def snapshot(
    lines: list[str], first: int = 0, per_segment: int = 3, overstruck: bool = False
) -> RetainedLines:
    """``lines`` numbered from ``first``, ``per_segment`` lines to a segment."""
    segments = tuple(
        (first + i, "".join(line + "\n" for line in lines[i : i + per_segment]))
        for i in range(0, len(lines), per_segment)
    )
    return RetainedLines(
        line_begin=first, line_end=first + len(lines), segments=segments, overstruck=overstruck
    )


def search(retained: RetainedLines, pattern: str, **kw: object) -> SearchResult:
    request = SearchRequest(pattern=pattern, **kw)  # type: ignore[arg-type]
    return search_retained(retained, compile_search(request), request)


def numbers(result: SearchResult) -> list[int]:
    """The matches' positions in the snapshot (counted from 0, as its segments are):
    a match's number is its position + 1, since every surface numbers lines from 1."""
    return [match.line_number - 1 for match in result.matches]


LINES = ["abc", "def", "xyz a", "", "foo"]


@pytest.mark.parametrize(
    ("pattern", "regex", "expected"),
    [
        ("a", False, [0, 2]),
        ("[^q]+", True, [0, 1, 2, 4]),  # a negated class never takes the newline
        (r"c\sd", True, []),  # nor does \s: a match never spans two lines
        ("^$", True, [3]),  # ^ and $ are each line's start and end
        ("a$", True, [2]),
        ("^d", True, [1]),
        ("x*", True, [0, 1, 2, 3, 4]),  # an empty match counts once per line
        ("a.c", False, []),  # a literal is literal
        ("a.c", True, [0]),
    ],
)
def test_each_line_is_matched_on_its_own(pattern: str, regex: bool, expected: list[int]) -> None:
    result = search(snapshot(LINES, first=7), pattern, regex=regex)
    assert numbers(result) == [7 + n for n in expected]
    assert all(m.line == LINES[m.line_number - 8] for m in result.matches)
    assert (result.line_begin, result.line_end, result.truncated) == (8, 12, False)


def test_the_newest_matches_are_kept_oldest_first() -> None:
    lines = [f"step {i} {'failed' if i % 3 == 0 else 'ok'}" for i in range(1000)]
    result = search(snapshot(lines, per_segment=7), "failed", max_matches=5)
    assert numbers(result) == [987, 990, 993, 996, 999] and result.truncated
    every = search(snapshot(lines, per_segment=7), "failed", max_matches=200)
    assert len(every.matches) == 200 and every.truncated
    exact = search(snapshot(lines[:15]), "failed", max_matches=5)
    assert numbers(exact) == [0, 3, 6, 9, 12] and not exact.truncated


def test_context_crosses_segments_and_stops_at_what_is_retained() -> None:
    lines = [f"l{i}" for i in range(10)]
    result = search(snapshot(lines, first=100, per_segment=2), "l[0459]$", regex=True, context=2)
    got = {m.line_number - 1: (m.before, m.after) for m in result.matches}
    assert got == {
        100: ((), ("l1", "l2")),
        104: (("l2", "l3"), ("l5", "l6")),
        105: (("l3", "l4"), ("l6", "l7")),
        109: (("l7", "l8"), ()),
    }


def test_case_unicode_and_literal_characters() -> None:
    lines = ["École fermée", "ecole", "ÉCOLE", "a+b (c)", "naïve 日本語 text"]
    retained = snapshot(lines)
    assert numbers(search(retained, "école", ignore_case=True)) == [0, 2]
    assert numbers(search(retained, "École")) == [0]
    assert numbers(search(retained, "a+b (c)")) == [3]
    assert numbers(search(retained, r"\p{Han}+", regex=True)) == [4]
    assert numbers(search(retained, "ÉCOLE", regex=True, ignore_case=True)) == [0, 2]


def test_a_long_line_is_shown_around_its_match() -> None:
    line = "é" * 1500 + "NEEDLE" + "ü" * 1500
    result = search(snapshot([line, "x" * 2000, "short NEEDLE"]), "NEEDLE", context=1)
    first, last = result.matches
    assert "NEEDLE" in first.line and first.line.startswith("…") and first.line.endswith("…")
    assert len(first.line) == MAX_LINE_CHARS + 2
    assert first.after == ("x" * MAX_LINE_CHARS + "…",)
    assert last.line == "short NEEDLE" and last.before == ("x" * MAX_LINE_CHARS + "…",)
    start = search(snapshot(["NEEDLE" + "y" * 900]), "NEEDLE").matches[0].line
    assert start.startswith("NEEDLE") and start.endswith("…") and len(start) == MAX_LINE_CHARS + 1


def test_backspaces_are_applied_before_matching() -> None:
    lines = ["N\bNA\bAM\bME\bE", "_\bb_\bo_\bl_\bd"]
    retained = snapshot(lines, overstruck=True)
    assert [m.line for m in search(retained, "NAME").matches] == ["NAME"]
    assert [m.line for m in search(retained, "^bold$", regex=True).matches] == ["bold"]


def test_matches_fill_the_byte_bound_newest_first() -> None:
    lines = [f"{i:04d} error " + "z" * 300 for i in range(400)]
    result = search(snapshot(lines, per_segment=50), "error", max_matches=200, max_bytes=4096)
    assert result.truncated and 5 <= len(result.matches) < 200
    assert numbers(result) == list(range(400 - len(result.matches), 400))
    shown = {"matches": [m.line for m in result.matches]}
    assert len(json.dumps(shown).encode()) <= 4096


def test_the_newest_match_alone_is_cut_to_the_bound() -> None:
    lines = ["€" * 600 for _ in range(5)] + ["€" * 400 + " hit " + "€" * 400] + ["€" * 600] * 5
    result = search(snapshot(lines), "hit", context=5, max_bytes=1024)
    [match] = result.matches
    size = utf8_len(match.line) + sum(utf8_len(line) + 12 for line in (*match.before, *match.after))
    assert size + 64 <= 1024 and match.line.startswith("…")


def test_a_catastrophic_pattern_is_answered_at_once() -> None:
    lines = ["a" * 50 + "b"] * 20_000 + ["xaaa"]
    started = time.monotonic()
    result = search(snapshot(lines, per_segment=4096), "(a+)+$", regex=True)
    assert time.monotonic() - started < 1.0
    assert numbers(result) == [20_000]  # exact, not stopped


Found = list[tuple[int, str, tuple[str, ...], tuple[str, ...]]]


def naive(
    lines: list[str], first: int, needle: str, fold: bool, keep: int, context: int
) -> tuple[Found, bool]:
    """The documented rules written the obvious way: (number, line, before, after)."""
    hits = [
        n
        for n, line in enumerate(lines)
        if (needle.lower() in line.lower() if fold else needle in line)
    ]
    return [
        (
            first + n,
            lines[n],
            tuple(lines[max(0, n - context) : n]),
            tuple(lines[n + 1 : n + 1 + context]),
        )
        for n in hits[-keep:]
    ], len(hits) > keep


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["ab", "xAb", "", "b", "aab c", "é ab", "zz"]), max_size=40),
    st.integers(0, 50),
    st.integers(1, 7),
    st.integers(1, 40),
    st.sampled_from(["ab", "b", "Ab", "z"]),
    st.booleans(),
    st.integers(1, 6),
    st.integers(0, 3),
)
def test_any_segmenting_and_chunking_finds_what_the_rules_say(
    lines: list[str],
    first: int,
    per_segment: int,
    chunk_chars: int,
    needle: str,
    fold: bool,
    keep: int,
    context: int,
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_module, "_CHUNK_CHARS", chunk_chars)
        result = search(
            snapshot(lines, first=first, per_segment=per_segment),
            needle,
            ignore_case=fold,
            max_matches=keep,
            context=context,
        )
    expected, truncated = naive(lines, first, needle, fold, keep, context)
    got = [(m.line_number - 1, m.line, m.before, m.after) for m in result.matches]
    assert (got, result.truncated) == (expected, truncated)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"pattern": ""}, "must not be empty"),
        ({"pattern": "x" * 1001}, "at most 1000"),
        ({"pattern": "a\nb"}, "line break"),
        ({"pattern": "\ud800"}, "not valid Unicode"),
        ({"pattern": 3}, "must be a string"),
        ({"pattern": "(", "regex": True}, "missing )"),
        ({"pattern": "(?=a)b", "regex": True}, "no backreferences or lookaround"),
        ({"pattern": r"(a)\1", "regex": True}, "invalid escape"),
        ({"pattern": "x", "regex": 1}, "regex must be a boolean"),
        ({"pattern": "x", "ignore_case": "yes"}, "ignore_case must be a boolean"),
        ({"pattern": "x", "context": 6}, "context must be an integer from 0 to 5"),
        ({"pattern": "x", "context": -1}, "context"),
        ({"pattern": "x", "context": True}, "context"),
        ({"pattern": "x", "max_matches": 0}, "max_matches must be an integer from 1 to 200"),
        ({"pattern": "x", "max_matches": 201}, "max_matches"),
    ],
)
def test_a_bad_request_is_an_invalid_argument(fields: dict[str, object], says: str) -> None:
    with pytest.raises(DshError) as info:
        compile_search(SearchRequest(**fields))  # type: ignore[arg-type]
    assert info.value.code == "INVALID_ARGUMENT" and says in info.value.message
    # The bare pattern is quoted in RE2's complaint, never the multi-line form it runs as.
    assert "(?m)" not in info.value.message


def test_literal_and_regex_may_be_up_to_a_thousand_characters() -> None:
    retained = snapshot(["x" * 1000])
    assert numbers(search(retained, "x" * 1000)) == [0]
    assert numbers(search(retained, "x" * 998 + "x$", regex=True)) == [0]


# -- the service ---------------------------------------------------------------------------


class LinesSession(FakeSession):
    """A fake session whose :attr:`lines` are searchable, in segments of 1,000 lines."""

    def retained_lines(self) -> RetainedLines:
        return snapshot(self.lines, per_segment=1000)


class LinesBackend(FakeBackend):
    async def spawn(self, context: BackendSpawnContext) -> FakeSession:
        session = LinesSession(context, pid=4000 + len(self.sessions))
        self.sessions.append(session)
        return session


async def expect(code: str, call: Callable[[], Awaitable[object]]) -> None:
    with pytest.raises(DshError) as info:
        await call()
    assert info.value.code == code, info.value


@pytest.fixture
def service() -> TerminalSessionService:
    svc = TerminalSessionService()
    svc.register_backend(LinesBackend("lines"))
    svc.register_backend(FakeBackend("plain"))
    return svc


async def test_the_service_searches_what_the_backend_retains(
    service: TerminalSessionService,
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, SpawnRequest(type="lines"))).session_id
    session = service.get_session(owner, sid)
    assert isinstance(session, SearchableSession)
    session.emit("".join(f"line {i}\n" for i in range(5000)))  # type: ignore[attr-defined]
    result = await service.search(owner, sid, SearchRequest(pattern="line 4999"))
    assert numbers(result) == [4999] and (result.line_begin, result.line_end) == (1, 5000)


async def test_errors_come_in_the_order_of_every_other_call(
    service: TerminalSessionService,
) -> None:
    owner, intruder = Agent("a"), Agent("b")
    sid = (await service.spawn(owner, SpawnRequest(type="lines"))).session_id
    plain = (await service.spawn(owner, SpawnRequest(type="plain"))).session_id
    bad = SearchRequest(pattern="")
    await expect("NO_SESSION", lambda: service.search(owner, "pty-99", bad))
    await expect("FOREIGN_SESSION", lambda: service.search(intruder, sid, bad))
    await expect("INVALID_ARGUMENT", lambda: service.search(owner, sid, bad))
    small = SearchRequest(pattern="x", max_bytes=100)
    await expect("INVALID_ARGUMENT", lambda: service.search(owner, sid, small))
    await expect("INVALID_ARGUMENT", lambda: service.search(owner, plain, bad))
    with pytest.raises(DshError) as info:
        await service.search(owner, plain, SearchRequest(pattern="x"))
    assert info.value.code == "UNSUPPORTED" and "retained_lines()" in info.value.message


async def test_a_large_snapshot_is_searched_off_the_event_loop(
    service: TerminalSessionService,
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, SpawnRequest(type="lines"))).session_id
    session = service.get_session(owner, sid)
    line = "src/x.c:1: warning: " + "w" * 60
    session.emit("".join(f"{line} {i}\n" for i in range(200_000)))  # type: ignore[attr-defined]
    ticks = 0
    searching = True

    async def tick() -> None:
        nonlocal ticks
        while searching:
            await asyncio.sleep(0.001)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.01)
    ticks = 0
    request = SearchRequest(pattern=r"^src/[a-z]\.c:\d+: error", regex=True)
    started = time.monotonic()
    result = await service.search(owner, sid, request)
    seen, elapsed = ticks, time.monotonic() - started
    searching = False
    await ticker
    assert result.matches == () and not result.truncated
    # The loop kept turning while RE2 read 17 MB in a worker thread (inline: no tick).
    assert seen >= 1, (seen, elapsed)


async def test_a_pattern_too_costly_for_the_text_is_stopped_within_a_second(
    service: TerminalSessionService,
) -> None:
    owner = Agent("a")
    sid = (await service.spawn(owner, SpawnRequest(type="lines"))).session_id
    session = service.get_session(owner, sid)
    rows = random.Random(7)
    text = "".join(
        "".join(rows.choice("ab") for _ in range(400)) + "\n" for _ in range(20_000)
    )  # 8 MB on which RE2's automaton has too many states: it simulates the NFA instead
    session.emit(text)  # type: ignore[attr-defined]
    costly = SearchRequest(pattern="(?:(?:[ab]{30}a){30})c", regex=True)
    started = time.monotonic()
    with pytest.raises(DshError) as info:
        await service.search(owner, sid, costly)
    assert time.monotonic() - started < 1.0 + 0.3  # the budget, and a loaded machine
    assert info.value.code == "INVALID_ARGUMENT" and "within 0.9 s" in info.value.message
    # The stopped search gave its thread back: a cheap one is answered at once.
    started = time.monotonic()
    cheap = await service.search(owner, sid, SearchRequest(pattern="^a{400}$", regex=True))
    assert cheap.matches == () and time.monotonic() - started < 1.0
