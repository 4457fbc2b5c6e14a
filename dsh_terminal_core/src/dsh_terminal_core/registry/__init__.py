"""The session registry (``ctx.terminals``): owner-scoped sessions and the backend contracts.

Owns: :class:`TerminalSessionService` (ids, authorization, limits, cleanup), the types
a backend implements and returns (:mod:`.types`), who types into a session (the agent,
or a person who took control: :mod:`.control`), the one rule for waiting on a line
(:mod:`.linematch`), searching retained lines (:mod:`.search`), backspace rendering
(:mod:`.overstrike`), what observers are told (:mod:`.observers`: the session a spawn is
for, every send) and the core ``terminals`` plugin (:mod:`.plugin`). Backend and
consumer authors import from here.

May import: the kernel and the provider's value types. Its old path
``dsh_terminal_core.terminals`` still imports (the same module).
"""

from ..kernel.errors import BackendCleanupError, TerminalError
from .checks import MAX_COLS, MAX_ROWS, MIN_COLS, MIN_ROWS
from .observers import spawning_session
from .service import TerminalSessionService
from .types import (
    ALLOWED_SIGNALS,
    MIN_REQUEST_BYTES,
    STATUS_SCHEMA,
    BackendSession,
    BackendSpawnContext,
    Highlight,
    HighlightValue,
    HumanReport,
    HumanReportValue,
    LineTailSession,
    ListeningSession,
    MarkedBackend,
    RawInputSession,
    ReadRequest,
    ReadResult,
    RetainedLines,
    ScreenRead,
    ScreenValue,
    ScreenView,
    SearchableSession,
    SearchMatch,
    SearchRequest,
    SearchResult,
    SecretPromptSession,
    SendObserver,
    SendOperation,
    SendRequest,
    SendResult,
    SessionStatus,
    SessionStatusValue,
    SettleNotifying,
    SignalResult,
    Snapshot,
    SpawnRequest,
    SpawnResult,
    TerminalBackend,
    TerminalSize,
    WaitReason,
    WatchedSession,
    status_text,
)

__all__ = [
    "ALLOWED_SIGNALS",
    "MAX_COLS",
    "MAX_ROWS",
    "MIN_COLS",
    "MIN_REQUEST_BYTES",
    "MIN_ROWS",
    "STATUS_SCHEMA",
    "BackendCleanupError",
    "BackendSession",
    "BackendSpawnContext",
    "Highlight",
    "HighlightValue",
    "HumanReport",
    "HumanReportValue",
    "LineTailSession",
    "ListeningSession",
    "MarkedBackend",
    "RawInputSession",
    "ReadRequest",
    "ReadResult",
    "RetainedLines",
    "ScreenRead",
    "ScreenValue",
    "ScreenView",
    "SearchMatch",
    "SearchRequest",
    "SearchResult",
    "SearchableSession",
    "SecretPromptSession",
    "SendObserver",
    "SendOperation",
    "SendRequest",
    "SendResult",
    "SessionStatus",
    "SessionStatusValue",
    "SettleNotifying",
    "SignalResult",
    "Snapshot",
    "SpawnRequest",
    "SpawnResult",
    "TerminalBackend",
    "TerminalError",
    "TerminalSessionService",
    "TerminalSize",
    "WaitReason",
    "WatchedSession",
    "spawning_session",
    "status_text",
]
