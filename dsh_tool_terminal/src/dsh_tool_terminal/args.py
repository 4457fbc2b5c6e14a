"""The arguments of the ``terminal_*`` tools, one ``TypedDict`` each.

:func:`~dsh_terminal_core.kernel.tooldecl.tool` derives each tool's input schema from
these (bounds and descriptions on the ``Annotated`` markers), and the tool bodies in
:mod:`.tools` read them as typed.
"""

from __future__ import annotations

from typing import Annotated, NotRequired, TypedDict

from dsh_terminal_core.kernel.tooldecl import Items, Range, Raw, Text
from dsh_terminal_core.registry import ALLOWED_SIGNALS, MAX_COLS, MAX_ROWS, MIN_COLS, MIN_ROWS
from dsh_terminal_core.registry.linematch import MAX_PATTERN_CHARS

__all__ = [
    "DEFAULT_TYPE",
    "MAX_SEND_CHARS",
    "CloseArgs",
    "ForegroundSendArgs",
    "ListArgs",
    "OpenArgs",
    "ReadArgs",
    "ResizeArgs",
    "SecretSpec",
    "SendArgs",
    "SignalArgs",
]

# One send may carry a long heredoc or a 10,000+ character command, but not a payload
# that would flood the PTY for minutes; larger inputs belong in a file.
MAX_SEND_CHARS = 1_000_000

DEFAULT_TYPE = "shell"

SessionId = Annotated[str, Text(1, 64), "The session id returned by terminal_open, e.g. pty-1."]
Rows = Annotated[int, Range(MIN_ROWS, MAX_ROWS), "Window height in rows."]
Cols = Annotated[int, Range(MIN_COLS, MAX_COLS), "Window width in columns."]


class OpenArgs(TypedDict, total=False):
    type: Annotated[
        str,
        Text(1, 64),
        Raw({"default": DEFAULT_TYPE}),
        "Terminal type (default 'shell', an interactive bash).",
    ]
    name: Annotated[str, Text(1, 64), "Optional display name, unique among your open sessions."]
    cwd: Annotated[str, Text(1, 4096), "Starting directory (default: the workspace root)."]
    screen: Annotated[
        bool,
        "Screen session (default false): for full-screen programs such as vim, less, top "
        "or dialog menus. Sends then return the visible screen when a program draws one; "
        "drive programs with keys.",
    ]
    rows: Rows
    cols: Cols
    world: Annotated[
        str,
        Text(1, 64),
        "Where the shell runs: an execution world the operator configured (a container, "
        "a pod, another host), e.g. 'local' for this host; default: the configured default. "
        "Every fact of a result is decided there; pids are that world's.",
    ]


class SecretSpec(TypedDict, total=False):
    """Exactly one of the two: said in the description, enforced by the tool.

    A count keyword (``minProperties``) would count the nulls a strict-mode client sends
    for the other.
    """

    name: Annotated[str, Text(1, 256)]
    ask: Annotated[str, Text(1, 1000)]


class ForegroundSendArgs(TypedDict):
    """``terminal_send``'s arguments where background sends are disabled."""

    sessionId: SessionId
    text: NotRequired[
        Annotated[
            str,
            Text(max_length=MAX_SEND_CHARS),
            "Text to type into the terminal. Give at most one of text, keys and secret; "
            "with none of them nothing is typed and the call only waits for the running "
            "command to settle (e.g. a long build).",
        ]
    ]
    secret: NotRequired[
        Annotated[
            SecretSpec,
            "Instead of text, at a password prompt (inputHidden=true): the harness types "
            "a secret you never see, then Enter. {name} takes a named secret the operator "
            "configured; {ask: why} asks the person at the client to type it into a page "
            "in their browser. Exactly one of name and ask.",
        ]
    ]
    submit: NotRequired[
        Annotated[
            bool,
            "Press Enter after the text (default true with text; without text, true "
            "presses Enter alone). false sends the exact text.",
        ]
    ]
    timeoutMs: NotRequired[
        Annotated[
            int,
            Range(minimum=1),
            "Time limit for this send in milliseconds (default 30000; at most the "
            "backend's max_timeout_ms, 600000 by default), also for a send that only "
            "waits (no text, keys or secret).",
        ]
    ]
    keys: NotRequired[
        Annotated[
            list[Annotated[str, Text(1, 10_000)]],
            Items(1, 1000),
            "Instead of text: keys to press, in order. Named keys: Enter, Tab, Escape, "
            "Backspace, Delete, Up, Down, Left, Right, Home, End, PageUp, PageDown, "
            "Insert, Space, F1-F12, C-a..C-z (Ctrl), M-<char> (Alt); any other item is "
            'typed literally, e.g. ["i", "hello", "Escape", ":wq", "Enter"]. Enter is '
            "pressed only where listed.",
        ]
    ]
    waitFor: NotRequired[
        Annotated[
            str,
            Text(1, MAX_PATTERN_CHARS),
            "A regular expression (Python re syntax): also return as soon as a complete "
            "line of output matches it (waitReason 'matched', with the line and its "
            "number). The program keeps running. For servers and watchers: start the "
            "server with waitFor 'Listening on' instead of sleeping and polling.",
        ]
    ]


class SendArgs(ForegroundSendArgs):
    """``terminal_send``'s arguments: what its body reads, offered with background sends."""

    run_in_background: NotRequired[
        Annotated[
            bool,
            "Return at once with a jobId instead of waiting; collect output with "
            "job_output, stop with job_kill.",
        ]
    ]


class ReadArgs(TypedDict):
    sessionId: SessionId
    offset: NotRequired[
        Annotated[
            int,
            Range(minimum=1),
            "First line to read, numbered from 1 (default 1, the oldest line); a "
            "result's more.offset is where the next page starts.",
        ]
    ]
    count: NotRequired[Annotated[int, Range(1, 10000), "Number of lines (default 500)."]]
    screen: NotRequired[Annotated[bool, "Screen sessions: return the visible screen instead."]]


class SignalArgs(TypedDict):
    sessionId: SessionId
    signal: Annotated[str, Raw({"enum": list(ALLOWED_SIGNALS)})]


class CloseArgs(TypedDict):
    sessionId: SessionId


class ResizeArgs(TypedDict):
    sessionId: SessionId
    rows: Rows
    cols: Cols


class ListArgs(TypedDict):
    """``terminal_list`` takes no arguments."""
