"""Backspaces and carriage returns rendered as a terminal shows them, for text a model reads.

``man``, ``nroff`` and ``grotty`` print bold as ``X\\bX`` and underline as ``_\\bX``; a
spinner draws ``|\\b/\\b-``. A terminal moves its cursor back one column on BS and the next
character overwrites that cell, so the person sees ``X`` and ``-``; passed through as
text, the model reads ``NNAAMMEE``. The sanitizer keeps BS in the stream (it cannot take
back text it already emitted when a BS arrives in a later chunk, and a line's text
reaches the scrollback in pieces), and the places where text leaves for a reader render
it with :func:`render`: the result is the same however the stream was split.

A progress line returns to its start with a lone CR (``X 0%\rX Done``; CRLF and
CR-CR-LF end the line instead, and the sanitizer turns them into LF): the terminal shows
``X Done``, and a longer earlier frame shows through where a shorter one ends
(``abcdef\rXY`` reads ``XYcdef``). Kept in the text for the same reason as BS.

The model is one line of cells and a cursor: BS moves the cursor left (never past the
start of the line), CR moves it to the start, any other character writes the cell under
the cursor and moves it right, and the line shows every cell written. Each code point
is one column: wide characters and combining marks are not measured, which only matters
to programs that backspace over them.
"""

from __future__ import annotations

import re

__all__ = ["BS", "CR", "needs_render", "render", "render_lines"]

BS = "\b"
CR = "\r"

# One character and the BS right after it, followed by a character: the second one
# overwrites the first whatever the cursor did before, so the pair may simply go. This
# handles all of bold, underline and a spinner's frames in one C pass.
_OVERSTRUCK = re.compile("[^\b\n]\b(?=[^\b\n])")  # \b: the BS character, not a boundary


def needs_render(text: str) -> bool:
    """True when ``text`` holds a BS or a CR, which :func:`render` applies."""
    return BS in text or CR in text


def render(text: str) -> str:
    """``text`` with every line's backspaces and returns applied; unchanged (the same
    object) without either."""
    if CR in text:
        text = "\n".join(_render_returns(line) if CR in line else line for line in text.split("\n"))
    if BS not in text:
        return text
    text = _OVERSTRUCK.sub("", text)
    if BS not in text:
        return text
    return "\n".join(_render_line(line) if BS in line else line for line in text.split("\n"))


def render_lines(lines: list[str]) -> list[str]:
    """Each line of ``lines`` rendered; the same list when none holds a BS or a CR."""
    if not any(BS in line or CR in line for line in lines):
        return lines
    return [render(line) if BS in line or CR in line else line for line in lines]


def _render_returns(line: str) -> str:
    """One line's frames laid over each other, each from the line's start.

    Each frame after a CR overwrites as many cells as it is long; cells beyond it keep
    what an earlier, longer frame wrote. Frames are whole strings, so a progress line of
    thousands of frames costs string slicing, not a loop over its characters. A frame
    with backspaces may be rendered on its own: it starts at the first column and BS
    never passes it, so it writes exactly the cells its own rendering holds.
    """
    frames = line.split(CR)
    shown = frames[-1]
    if BS in shown:
        shown = _render_line(_OVERSTRUCK.sub("", shown))
    for frame in reversed(frames[:-1]):
        if len(frame) <= len(shown):
            continue  # wholly overwritten by what came after
        if BS in frame:
            frame = _render_line(_OVERSTRUCK.sub("", frame))
        shown += frame[len(shown) :]
    return shown


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
