"""Track the terminal modes a program switches with escape sequences.

Key encoding depends on them (an arrow key is ``ESC O A`` once a program enables
application cursor keys, ``ESC [ A`` otherwise), and a line-mode session reports a program
that switched to the alternate screen. A full emulator is not needed for that: the modes
are set by a handful of sequences — ``CSI ? Pm h`` / ``CSI ? Pm l`` (DECSET/DECRST),
``ESC =`` / ``ESC >`` (keypad) and ``ESC c`` (full reset) — so this scanner looks only at
escape bytes, carries an incomplete sequence across chunks, and costs one ``find`` per
chunk that holds no escape at all.
"""

from __future__ import annotations

import re

import attrs

__all__ = ["ModeTracker", "TerminalModes"]

# DECSET/DECRST parameters this project acts on.
_APPLICATION_CURSOR = 1
_ALTERNATE_SCREENS = frozenset({47, 1047, 1049})

_SEQUENCE = re.compile(rb"\x1b(?:\[\?([0-9;]*)([hl])|([=>c]))")
# A suffix that could still grow into one of the sequences above.
_INCOMPLETE = re.compile(rb"\x1b(?:\[(?:\?[0-9;]*)?)?\Z")
# An incomplete sequence longer than this is not one we track; drop it.
_MAX_CARRY = 64


@attrs.frozen(kw_only=True)
class TerminalModes:
    """The modes that change what a key sends or what the screen shows."""

    application_cursor: bool = False
    application_keypad: bool = False
    alternate_screen: bool = False


@attrs.define
class ModeTracker:
    """Follow mode switches in a program's raw output, chunk by chunk."""

    application_cursor: bool = False
    application_keypad: bool = False
    alternate_screen: bool = False
    #: Set whenever the alternate screen was entered; the reader clears it.
    entered_alternate: bool = False
    _carry: bytes = b""

    @property
    def modes(self) -> TerminalModes:
        return TerminalModes(
            application_cursor=self.application_cursor,
            application_keypad=self.application_keypad,
            alternate_screen=self.alternate_screen,
        )

    def feed(self, data: bytes) -> None:
        """Apply every mode switch in ``data``; keep an unfinished sequence for the next."""
        if self._carry:
            data = self._carry + bytes(data)
            self._carry = b""
        elif data.find(b"\x1b") < 0:
            return
        for match in _SEQUENCE.finditer(data):
            params, action, single = match.groups()
            if single is not None:
                self._apply_single(single)
            else:
                self._apply_private(params, action == b"h")
        tail_start = data.rfind(b"\x1b")
        if tail_start >= 0 and len(data) - tail_start <= _MAX_CARRY:
            tail = data[tail_start:]
            if _INCOMPLETE.match(tail):
                self._carry = bytes(tail)

    def reset(self) -> None:
        self.application_cursor = False
        self.application_keypad = False
        self.alternate_screen = False

    def _apply_single(self, code: bytes) -> None:
        if code == b"=":
            self.application_keypad = True
        elif code == b">":
            self.application_keypad = False
        else:  # ESC c: full reset
            self.reset()

    def _apply_private(self, params: bytes, enable: bool) -> None:
        for part in params.split(b";"):
            if not part:
                continue
            value = int(part)
            if value == _APPLICATION_CURSOR:
                self.application_cursor = enable
            elif value in _ALTERNATE_SCREENS:
                self.alternate_screen = enable
                if enable:
                    self.entered_alternate = True
