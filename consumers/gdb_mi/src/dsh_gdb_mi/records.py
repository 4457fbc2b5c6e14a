"""GDB/MI output records: the value types and a parser for one line of MI output.

The grammar is the one in the GDB manual ("GDB/MI Output Syntax")::

    result-record  = [token] "^" result-class ("," result)*
    async-record   = [token] ("*" | "+" | "=") async-class ("," result)*
    stream-record  = ("~" | "@" | "&") c-string
    result         = variable "=" value
    value          = c-string | tuple | list
    tuple          = "{}" | "{" result ("," result)* "}"
    list           = "[]" | "[" value ("," value)* "]" | "[" result ("," result)* "]"

plus the prompt line ``(gdb)`` that ends every response.

The terminal gdb talks to is shared with the program being debugged, so a line that is
not MI (the program's own output, the terminal echoing our input) is normal, not an
error: it becomes an ``OTHER`` record holding the raw text.

Values map to Python as: c-string -> ``str`` (escapes decoded, bytes decoded as UTF-8),
tuple -> ``dict``, list of values -> ``list``, list of results -> ``list`` of one-entry
``dict``\\ s (names repeat there, e.g. ``stack=[frame={...},frame={...}]``, so they are
kept per item). Where gdb repeats a name inside one tuple, or writes a value without a
name after a result (MI2's multi-location breakpoints: ``bkpt={...},{...}``), the values
are gathered into a list under that name, so nothing is lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NotRequired, TypedDict, Union

__all__ = [
    "MiList",
    "MiRecord",
    "MiRecordValue",
    "MiSyntaxError",
    "MiTuple",
    "MiValue",
    "RecordKind",
    "parse_cstring",
    "parse_line",
]

MiValue = Union[str, "MiTuple", "MiList"]
MiTuple = dict[str, MiValue]
MiList = list[MiValue]


class RecordKind(StrEnum):
    """What a line of gdb output is; the values are the wire names."""

    RESULT = "result"  # ^done, ^running, ^connected, ^error, ^exit
    EXEC = "exec"  # *stopped, *running: the target's execution state changed
    STATUS = "status"  # +download ...: progress of a slow operation
    NOTIFY = "notify"  # =library-loaded, =breakpoint-modified, ...
    CONSOLE = "console"  # ~"...": what the CLI would have printed
    TARGET = "target"  # @"...": output of the remote target
    LOG = "log"  # &"...": gdb's own log and error text
    PROMPT = "prompt"  # (gdb): the end of a response
    OTHER = "other"  # not MI: program output or input echo


_SIGILS = {
    "^": RecordKind.RESULT,
    "*": RecordKind.EXEC,
    "+": RecordKind.STATUS,
    "=": RecordKind.NOTIFY,
    "~": RecordKind.CONSOLE,
    "@": RecordKind.TARGET,
    "&": RecordKind.LOG,
}
_STREAMS = frozenset({RecordKind.CONSOLE, RecordKind.TARGET, RecordKind.LOG})
_HEAD = re.compile(r"(\d*)([\^*+=~@&])")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_OCTAL = re.compile(r"[0-7]{1,3}")
_HEX = re.compile(r"[0-9A-Fa-f]{1,2}")
_SIMPLE_ESCAPES = {
    "n": b"\n",
    "t": b"\t",
    "r": b"\r",
    "\\": b"\\",
    '"': b'"',
    "'": b"'",
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "v": b"\v",
    "e": b"\x1b",
    "?": b"?",
}


class MiSyntaxError(ValueError):
    """Text that claims to be MI does not follow the grammar; ``position`` is where."""

    def __init__(self, message: str, text: str, position: int) -> None:
        super().__init__(f"{message} at column {position}: {text!r}")
        self.text = text
        self.position = position


# A record on the wire (``class`` is a keyword, hence the functional form). ``results``
# is an ``MiTuple``; its schema says only "object", as MI values nest without bound.
MiRecordValue = TypedDict(
    "MiRecordValue",
    {
        "kind": str,
        "token": NotRequired[int],
        "class": NotRequired[str],
        "results": NotRequired[dict[str, Any]],
        "text": NotRequired[str],
    },
)


@dataclass(frozen=True, kw_only=True, slots=True)
class MiRecord:
    """One line of gdb output, classified and parsed.

    ``record_class`` is the word after the sigil (``done``, ``stopped``,
    ``library-loaded``); ``results`` its ``name=value`` pairs; ``text`` the decoded
    c-string of a stream record, or the raw line of an ``OTHER`` record; ``raw`` the line
    exactly as received.
    """

    kind: RecordKind
    raw: str
    token: int | None = None
    record_class: str | None = None
    results: MiTuple = field(default_factory=dict)
    text: str | None = None

    @property
    def is_result(self) -> bool:
        return self.kind is RecordKind.RESULT

    @property
    def is_stopped(self) -> bool:
        return self.kind is RecordKind.EXEC and self.record_class == "stopped"

    def to_wire(self) -> MiRecordValue:
        """JSON-able form: ``kind`` always, the other fields when they carry something."""
        wire: MiRecordValue = {"kind": str(self.kind)}
        if self.token is not None:
            wire["token"] = self.token
        if self.record_class is not None:
            wire["class"] = self.record_class
        if self.results:
            wire["results"] = self.results
        if self.text is not None:
            wire["text"] = self.text
        return wire


def parse_line(line: str) -> MiRecord:
    """Classify and parse one line of gdb output (without its newline).

    Never raises: a line that does not follow the MI grammar completely is returned as
    an ``OTHER`` record, since the debugged program writes to the same terminal.
    """
    if line.rstrip() == "(gdb)":
        return MiRecord(kind=RecordKind.PROMPT, raw=line)
    head = _HEAD.match(line)
    if head is None:
        return MiRecord(kind=RecordKind.OTHER, raw=line, text=line)
    try:
        return _parse_record(line, head)
    except MiSyntaxError:
        return MiRecord(kind=RecordKind.OTHER, raw=line, text=line)


def _parse_record(line: str, head: re.Match[str]) -> MiRecord:
    token = int(head.group(1)) if head.group(1) else None
    kind = _SIGILS[head.group(2)]
    parser = _Parser(line, head.end())
    if kind in _STREAMS:
        text = parser.cstring()
        parser.end()
        return MiRecord(kind=kind, raw=line, token=token, text=text)
    name = _NAME.match(line, parser.pos)
    if name is None:
        raise MiSyntaxError("expected a record class", line, parser.pos)
    parser.pos = name.end()
    results = parser.results()
    return MiRecord(kind=kind, raw=line, token=token, record_class=name.group(), results=results)


def parse_cstring(text: str) -> str:
    """Decode one MI c-string (quotes included) that makes up all of ``text``."""
    parser = _Parser(text, 0)
    value = parser.cstring()
    parser.end()
    return value


class _Parser:
    """Recursive descent over one line; ``pos`` is the next character to read."""

    def __init__(self, text: str, pos: int) -> None:
        self.text = text
        self.pos = pos

    def fail(self, message: str) -> MiSyntaxError:
        return MiSyntaxError(message, self.text, self.pos)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def end(self) -> None:
        # gdb writes "(gdb) " with a trailing space; tolerate trailing blanks anywhere.
        if self.text[self.pos :].strip():
            raise self.fail("unexpected text after the record")
        self.pos = len(self.text)

    def results(self) -> MiTuple:
        """``("," result)*`` up to the end of the line, tolerating MI2's nameless values."""
        out: MiTuple = {}
        gathered: set[str] = set()
        last: str | None = None
        while self.text[self.pos :].strip():
            self.expect(",")
            if self.peek() in ('"', "{", "[") and last is not None:
                _add(out, gathered, last, self.value())
                continue
            name, value = self.result()
            _add(out, gathered, name, value)
            last = name
        self.pos = len(self.text)
        return out

    def result(self) -> tuple[str, MiValue]:
        match = _NAME.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a result name")
        self.pos = match.end()
        self.expect("=")
        return match.group(), self.value()

    def value(self) -> MiValue:
        char = self.peek()
        if char == '"':
            return self.cstring()
        if char == "{":
            return self.tuple()
        if char == "[":
            return self.list()
        raise self.fail("expected a value (c-string, tuple or list)")

    def tuple(self) -> MiTuple:
        self.expect("{")
        out: MiTuple = {}
        gathered: set[str] = set()
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            name, value = self.result()
            _add(out, gathered, name, value)
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return out

    def list(self) -> MiList:
        self.expect("[")
        out: MiList = []
        if self.peek() == "]":
            self.pos += 1
            return out
        while True:
            if self.peek() in ('"', "{", "["):
                out.append(self.value())
            else:
                name, value = self.result()
                out.append({name: value})
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return out

    def cstring(self) -> str:
        """A C-style quoted string; octal and hex escapes are bytes, decoded as UTF-8."""
        self.expect('"')
        text = self.text
        out = bytearray()
        start = self.pos
        while True:
            stop = _next_special(text, self.pos)
            if stop < 0:
                self.pos = len(text)
                raise MiSyntaxError("unterminated c-string", text, start - 1)
            out += text[self.pos : stop].encode("utf-8", "surrogatepass")
            self.pos = stop + 1
            if text[stop] == '"':
                return out.decode("utf-8", "replace")
            out += self._escape()

    def _escape(self) -> bytes:
        text = self.text
        if self.pos >= len(text):
            raise self.fail("dangling backslash")
        char = text[self.pos]
        octal = _OCTAL.match(text, self.pos)
        if octal is not None:
            self.pos = octal.end()
            return bytes([int(octal.group(), 8) & 0xFF])
        if char == "x":
            digits = _HEX.match(text, self.pos + 1)
            if digits is not None:
                self.pos = digits.end()
                return bytes([int(digits.group(), 16)])
        self.pos += 1
        simple = _SIMPLE_ESCAPES.get(char)
        if simple is not None:
            return simple
        # An escape C does not define: keep it as written rather than guess.
        return ("\\" + char).encode("utf-8", "surrogatepass")


def _next_special(text: str, pos: int) -> int:
    """Index of the next ``"`` or ``\\`` at or after ``pos``, or -1."""
    quote = text.find('"', pos)
    backslash = text.find("\\", pos)
    if backslash < 0 or (0 <= quote < backslash):
        return quote
    return backslash


def _add(out: MiTuple, gathered: set[str], name: str, value: MiValue) -> None:
    """Store ``name=value``; a repeated name gathers its values into a list."""
    if name not in out:
        out[name] = value
        return
    if name not in gathered:
        out[name] = [out[name]]
        gathered.add(name)
    existing = out[name]
    assert isinstance(existing, list)
    existing.append(value)
