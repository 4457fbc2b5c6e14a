"""The ``terminal_search`` tool: find lines in a session's retained output (SPEC §23).

A thin layer over :meth:`TerminalSessionService.search`: the service checks, snapshots
and searches; this module says it in the model's numbers (lines from 1, as
``terminal_read`` shows them) and renders the matches grep-style within the result cap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, NotRequired, TypedDict

from dsh_terminal_core.kernel.resultcap import cap_text
from dsh_terminal_core.kernel.tooldecl import Range, Raw, Text, tool
from dsh_terminal_core.kernel.tools import Tool, ToolExec
from dsh_terminal_core.kernel.wiring import kept_resolution
from dsh_terminal_core.registry import (
    MIN_REQUEST_BYTES,
    SearchRequest,
    SearchResult,
    TerminalSessionService,
)
from dsh_terminal_core.registry.linematch import MAX_PATTERN_CHARS
from dsh_terminal_core.registry.search import DEFAULT_MATCHES, MAX_CONTEXT, MAX_MATCHES

from .config import ToolTerminalConfig

__all__ = ["SearchArgs", "SearchValue", "render_search", "search_tool", "search_value"]

# Bytes of a result kept for its header line: the matches get the rest of the cap.
_HEADER_ROOM = 512


class SearchArgs(TypedDict):
    sessionId: Annotated[str, Text(1, 64), "The session id returned by terminal_open, e.g. pty-1."]
    pattern: Annotated[
        str,
        Text(1, MAX_PATTERN_CHARS),
        "What to find in each line: a literal string, or with regex=true an RE2 regular "
        "expression (no lookaround or backreferences). Lines are matched one at a time.",
    ]
    regex: NotRequired[
        Annotated[bool, Raw({"default": False}), "Treat pattern as a regular expression."]
    ]
    ignoreCase: NotRequired[
        Annotated[bool, Raw({"default": False}), "Match letters in either case."]
    ]
    context: NotRequired[
        Annotated[
            int,
            Range(0, MAX_CONTEXT),
            Raw({"default": 0}),
            "Lines shown before and after each match.",
        ]
    ]
    maxMatches: NotRequired[
        Annotated[
            int,
            Range(1, MAX_MATCHES),
            Raw({"default": DEFAULT_MATCHES}),
            "Most matches returned; when more lines match, the newest are kept.",
        ]
    ]


class SearchMatchValue(TypedDict):
    lineNumber: Annotated[int, "The line's number, as terminal_read's offset takes it."]
    line: str
    before: list[str]
    after: list[str]


class SearchedValue(TypedDict):
    lineBegin: int
    lineEnd: int


class SearchValue(TypedDict):
    matches: Annotated[list[SearchMatchValue], "Oldest first: the newest match is last."]
    searched: Annotated[
        SearchedValue, "The retained lines searched, from 1, inclusive (none: end < begin)."
    ]
    truncated: Annotated[bool, "Older matches were left out (maxMatches or the size bound)."]


def search_value(result: SearchResult) -> SearchValue:
    """Line numbers as ``terminal_read`` shows them: from 1, ``lineEnd`` inclusive."""
    return {
        "matches": [
            {
                "lineNumber": match.line_number,
                "line": match.line,
                "before": list(match.before),
                "after": list(match.after),
            }
            for match in result.matches
        ],
        "searched": {"lineBegin": result.line_begin, "lineEnd": result.line_end},
        "truncated": result.truncated,
    }


def render_search(value: SearchValue, max_bytes: int, session_id: str) -> str:
    """A header, then ``grep -n`` style groups: ``N:line`` matches, ``N-line`` context."""
    matches = value["matches"]
    begin, end = value["searched"]["lineBegin"], value["searched"]["lineEnd"]
    if end < begin:
        return cap_text(f"[{session_id}: no lines retained yet]", max_bytes)
    where = f"lines {begin}-{end}"
    if not matches:
        return cap_text(f"[{session_id}: no match in {where}]", max_bytes)
    count = f"{len(matches)} match{'es' if len(matches) != 1 else ''}"
    head = f"[{session_id}: {count} in {where}, newest last"
    if value["truncated"]:
        head += "; older matches left out: narrow the pattern, or read around a line with "
        head += "terminal_read"
    head += "]"
    body: list[str] = []
    shown = 0  # the last line number written
    for match in matches:
        number = match["lineNumber"]
        first = number - len(match["before"])
        if body and first > shown + 1:
            body.append("--")
        for offset, line in enumerate(match["before"]):
            if first + offset > shown:
                body.append(f"{first + offset}-{line}")
        if number > shown:
            body.append(f"{number}:{match['line']}")
        for offset, line in enumerate(match["after"], start=1):
            if number + offset > shown:
                body.append(f"{number + offset}-{line}")
        shown = max(shown, number + len(match["after"]))
    return cap_text("\n".join(body), max_bytes, prefix=head + "\n", keep="tail")


def search_tool(
    terminals: Callable[[], TerminalSessionService], config: ToolTerminalConfig
) -> Tool:
    """Build ``terminal_search``; ``terminals`` resolves the service at call time."""
    terminals = kept_resolution(terminals)
    cap = config.max_result_bytes
    lines_bytes = max(MIN_REQUEST_BYTES, cap - _HEADER_ROOM)

    def render(args: SearchArgs, value: SearchValue) -> str:
        return render_search(value, cap, args["sessionId"])

    @tool(
        "terminal_search",
        description=(
            "Search a session's retained output (its scrollback) for lines matching "
            "pattern, and return them with their line numbers, newest last: e.g. search a "
            "long build's output for 'error' instead of paging it with terminal_read. A "
            "literal by default; regex=true for an RE2 regular expression. Each match "
            "can bring context lines; its lineNumber is terminal_read's offset."
        ),
        render=render,
        finalize=lambda text: cap_text(text, cap),
    )
    async def terminal_search(args: SearchArgs, exec_: ToolExec) -> SearchValue:
        result = await terminals().search(
            exec_.agent,
            args["sessionId"],
            SearchRequest(
                pattern=args["pattern"],
                regex=args.get("regex", False),
                ignore_case=args.get("ignoreCase", False),
                context=args.get("context", 0),
                max_matches=args.get("maxMatches", DEFAULT_MATCHES),
                max_bytes=lines_bytes,
            ),
        )
        return search_value(result)

    return terminal_search
