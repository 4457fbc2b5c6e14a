"""Named keys: what a model writes (``["i", "hello", "Escape", ":wq", "Enter"]``) → bytes.

A list item that is a known key name is that key, encoded for the terminal's current
modes; an item *shaped* like a key name that is not one (``PageDwn``, ``F13``, ``C-1``) is
refused before anything is typed, because a misspelled key must never reach a program as
text; every other item — a single character included (``G``, ``O``) — is typed literally.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from dsh_terminal_core.kernel.errors import TerminalError

from .modes import TerminalModes

__all__ = ["KEY_NAMES", "encode_keys"]

_CSI = "\x1b["
_SS3 = "\x1bO"

# Keys whose encoding does not depend on a mode.
_FIXED: dict[str, str] = {
    "Enter": "\r",
    "Tab": "\t",
    "Escape": "\x1b",
    "Backspace": "\x7f",
    "Space": " ",
    "Delete": _CSI + "3~",
    "Insert": _CSI + "2~",
    "PageUp": _CSI + "5~",
    "PageDown": _CSI + "6~",
    "F1": _SS3 + "P",
    "F2": _SS3 + "Q",
    "F3": _SS3 + "R",
    "F4": _SS3 + "S",
    "F5": _CSI + "15~",
    "F6": _CSI + "17~",
    "F7": _CSI + "18~",
    "F8": _CSI + "19~",
    "F9": _CSI + "20~",
    "F10": _CSI + "21~",
    "F11": _CSI + "23~",
    "F12": _CSI + "24~",
}

# Cursor keys: the final byte; ``CSI`` in normal mode, ``SS3`` in application mode (DECCKM).
_CURSOR: dict[str, str] = {
    "Up": "A",
    "Down": "B",
    "Right": "C",
    "Left": "D",
    "Home": "H",
    "End": "F",
}

_CONTROL = re.compile(r"C-([a-z])\Z")
_META = re.compile(r"M-(.)\Z", re.DOTALL)
# Items shaped like a key name: refused unless they are one.
_KEY_SHAPED = (
    re.compile(r"[A-Z][A-Za-z0-9]*\Z"),
    re.compile(r"[CMS]-.+\Z", re.DOTALL),
    re.compile(r"F[0-9]+\Z"),
)

#: Every key name accepted, for schemas and error messages.
KEY_NAMES: tuple[str, ...] = (
    *_FIXED,
    *_CURSOR,
    "C-a..C-z",
    "M-<char>",
)


def encode_keys(items: Sequence[str], modes: TerminalModes) -> str:
    """Return the text to type for ``items``; raise before encoding anything on a bad item.

    Raises ``TerminalError(INVALID_ARGUMENT)`` for an empty list, a non-string item, or an
    item shaped like a key name that is not one.
    """
    if not items:
        raise TerminalError("keys must list at least one key or string", "INVALID_ARGUMENT")
    return "".join(_encode_item(item, modes) for item in items)


def _encode_item(item: object, modes: TerminalModes) -> str:
    if not isinstance(item, str) or not item:
        raise TerminalError(
            f"each keys item must be a non-empty string, got {item!r}", "INVALID_ARGUMENT"
        )
    fixed = _FIXED.get(item)
    if fixed is not None:
        return fixed
    final = _CURSOR.get(item)
    if final is not None:
        return (_SS3 if modes.application_cursor else _CSI) + final
    control = _CONTROL.match(item)
    if control:
        return chr(ord(control.group(1)) - ord("a") + 1)
    meta = _META.match(item)
    if meta:
        return "\x1b" + meta.group(1)
    # One character is never a misspelled key name (every name is longer), and capitals
    # are everyday commands in full-screen programs (vim's G, O, A).
    if len(item) > 1 and any(shape.match(item) for shape in _KEY_SHAPED):
        raise TerminalError(
            f"unknown key {item!r}; known keys: {', '.join(KEY_NAMES)}. To type a word "
            "shaped like a key name, send it with text instead of keys",
            "INVALID_ARGUMENT",
        )
    return item
