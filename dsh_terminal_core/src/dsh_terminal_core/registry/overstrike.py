"""Backspaces rendered as a terminal shows them, for text a model reads.

``man``, ``nroff`` and ``grotty`` print bold as ``X\\bX`` and underline as ``_\\bX``; a
spinner draws ``|\\b/\\b-``. A terminal moves its cursor back one column on BS and the next
character overwrites that cell, so the person sees ``X`` and ``-``; passed through as
text, the model reads ``NNAAMMEE``. The sanitizer keeps BS in the stream (it cannot take
back text it already emitted when a BS arrives in a later chunk, and a line's text
reaches the scrollback in pieces), and the places where text leaves for a reader render
it with :func:`render`: the result is the same however the stream was split.

The model is one line of cells and a cursor: BS moves the cursor left (never past the
start of the line), any other character writes the cell under the cursor and moves it
right, and the line shows every cell written. Each code point is one column: wide
characters and combining marks are not measured, which only matters to programs that
backspace over them.
"""

from __future__ import annotations

import re

__all__ = ["BS", "render", "render_lines"]

BS = "\b"

# One character and the BS right after it, followed by a character: the second one
# overwrites the first whatever the cursor did before, so the pair may simply go. This
# handles all of bold, underline and a spinner's frames in one C pass.
_OVERSTRUCK = re.compile("[^\b\n]\b(?=[^\b\n])")  # \b: the BS character, not a boundary


def render(text: str) -> str:
    """``text`` with every line's backspaces applied; unchanged (the same object) without BS."""
    if BS not in text:
        return text
    text = _OVERSTRUCK.sub("", text)
    if BS not in text:
        return text
    return "\n".join(_render_line(line) if BS in line else line for line in text.split("\n"))


def render_lines(lines: list[str]) -> list[str]:
    """Each line of ``lines`` rendered; the same list when none holds a BS."""
    if not any(BS in line for line in lines):
        return lines
    return [render(line) if BS in line else line for line in lines]


def _render_line(line: str) -> str:
    """The cell model for what the fast pass left: runs of BS, a BS at a line's end."""
    cells: list[str] = []
    column = 0
    for char in line:
        if char == BS:
            if column:
                column -= 1
        elif column < len(cells):
            cells[column] = char
            column += 1
        else:
            cells.append(char)
            column += 1
    return "".join(cells)
