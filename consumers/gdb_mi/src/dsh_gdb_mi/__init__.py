"""A gdb/MI consumer of ``ctx.pty``: MI record parsing and framing, a session, a tool.

The facade moves bytes; everything MI — tokens, records, the ``(gdb)`` prompt that ends
a response, waiting for ``*stopped`` — lives here, on the consumer's side.
"""

from .framer import MiFramer
from .records import (
    MiList,
    MiRecord,
    MiSyntaxError,
    MiTuple,
    MiValue,
    RecordKind,
    parse_cstring,
    parse_line,
)
from .session import GdbMiError, GdbMiSession
from .tool import GdbMiSessions, gdb_mi_tool

__all__ = [
    "GdbMiError",
    "GdbMiSession",
    "GdbMiSessions",
    "MiFramer",
    "MiList",
    "MiRecord",
    "MiSyntaxError",
    "MiTuple",
    "MiValue",
    "RecordKind",
    "gdb_mi_tool",
    "parse_cstring",
    "parse_line",
]
