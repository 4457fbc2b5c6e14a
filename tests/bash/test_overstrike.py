"""Backspace and carriage-return rendering: what a terminal shows of bold, underline,
spinners and progress lines (SPEC §19.2, §27.2)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_terminal_bash.viewport import ViewportBuffer
from dsh_terminal_core.registry.overstrike import render, render_lines
from dsh_terminal_core.registry.scrollback import Scrollback


def cells(text: str) -> str:
    """Reference: the cell model character by character, line by line."""
    out: list[str] = []
    for line in text.split("\n"):
        row: list[str] = []
        col = 0
        for char in line:
            if char == "\b":
                col = max(col - 1, 0)
            elif char == "\r":
                col = 0
            elif col < len(row):
                row[col] = char
                col += 1
            else:
                row.append(char)
                col += 1
        out.append("".join(row))
    return "\n".join(out)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("N\bNA\bAM\bME\bE", "NAME"),  # man's bold
        ("_\bO_\bP_\bT", "OPT"),  # man's underline
        ("|\b/\b-\b\\\b|\b-", "-"),  # a spinner ends as its last frame
        ("abc\b\bX", "aXc"),  # the cursor moved back, one cell overwritten
        ("ab\b\b\b\bXY", "XY"),  # never past the start of the line
        ("ab\b", "ab"),  # a BS alone erases nothing
        ("one\ntwo\b\bWO", "one\ntWO"),  # never across a line end
        ("\bx", "x"),
        ("plain text\n", "plain text\n"),
        ("\rX 0%\rX Done\n", "X Done\n"),  # apt's progress, CR-CR-LF already an LF
        ("abcdef\rXY", "XYcdef"),  # a shorter frame leaves the longer one's end
        ("50%\r", "50%"),  # a return alone erases nothing
        ("1%\r2%\r100%\ndone", "100%\ndone"),
        ("wxyz\rab\b\b\b\bQ", "Qbyz"),
    ],
)
def test_renders_as_a_terminal_shows(raw: str, shown: str) -> None:
    assert render(raw) == shown == cells(raw)


def test_text_without_backspace_is_the_same_object() -> None:
    text = "no backspace here\n" * 10
    assert render(text) is text
    lines = ["a", "b"]
    assert render_lines(lines) is lines


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab_\b\r\n|", max_size=60))
def test_fast_pass_agrees_with_the_cell_model(text: str) -> None:
    assert render(text) == cells(text)


def test_scrollback_applies_a_backspace_that_came_in_a_later_piece() -> None:
    scrollback = Scrollback()
    for piece in ["Working |", "\b/", "\b-", "\b done\n", "N", "\bNAME\n", "pro", "\b"]:
        scrollback.append(piece)
    assert scrollback.read(1, 10, 10_000).text == "Working  done\nNAME\npro"
    assert scrollback.lines_since(0)[0] == ["Working  done", "NAME"]
    assert scrollback.open_line == "pro"
    assert scrollback.tail_text(100) == "Working  done\nNAME\npro"


def test_viewport_applies_backspaces() -> None:
    viewport = ViewportBuffer(10_000)
    for piece in ["N", "\bNA\bAME\n", "|", "\b/"]:
        viewport.append(piece)
    assert viewport.text() == "NAME\n/"


def _has_man_page(name: str) -> bool:
    import shutil
    import subprocess

    if shutil.which("man") is None:
        return False
    found = subprocess.run(["man", "-w", name], capture_output=True, check=False)
    return found.returncode == 0


@pytest.mark.skipif(not _has_man_page("ls"), reason="no man page for ls here")
async def test_man_page_reads_as_text_in_a_line_session() -> None:
    from dsh_terminal_core.kernel.harness import Harness

    from ..helpers import full_access

    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        # man formats for 80 columns and pipes into the session's pager (cat), which
        # passes the overstrike through: the rendering is ours.
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "man ls"})
        assert sent.value["waitReason"] == "stdin_read" and sent.value["exitCode"] == 0
        viewport = sent.value["viewport"]
        assert "NAME" in viewport and "SYNOPSIS" in viewport
        assert "NNAAMMEE" not in viewport and "\b" not in viewport
        read = await h.call_tool(agent, "terminal_read", {"sessionId": sid, "offset": 1})
        assert "NAME" in read.value["text"] and "\b" not in read.value["text"]
        await agent.dispose()


async def test_spinner_and_bold_in_a_line_session() -> None:
    from dsh_terminal_core.kernel.harness import Harness

    from ..helpers import full_access

    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        text = r"""for f in '|' / - x; do printf '%s\b' "$f"; done; printf 'B\bBold\n'"""
        sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": text})
        assert sent.value["waitReason"] == "stdin_read"
        assert sent.value["viewport"] == "Bold\n"
        await agent.dispose()
