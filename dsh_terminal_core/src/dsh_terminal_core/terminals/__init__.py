"""Owner-scoped terminal sessions: the registry and the contracts backends implement.

Backend and consumer authors import from here; the modules behind it are private.
"""

from ..errors import BackendCleanupError, TerminalError
from .service import TerminalSessionService
from .types import (
    ALLOWED_SIGNALS,
    MIN_REQUEST_BYTES,
    STATUS_SCHEMA,
    BackendSession,
    BackendSpawnContext,
    LineTailSession,
    MarkedBackend,
    ReadRequest,
    ReadResult,
    SecretPromptSession,
    SendOperation,
    SendRequest,
    SendResult,
    SessionStatus,
    SignalResult,
    Snapshot,
    SpawnRequest,
    SpawnResult,
    TerminalBackend,
    WaitReason,
    status_text,
)

__all__ = [
    "ALLOWED_SIGNALS",
    "MIN_REQUEST_BYTES",
    "STATUS_SCHEMA",
    "BackendCleanupError",
    "BackendSession",
    "BackendSpawnContext",
    "LineTailSession",
    "MarkedBackend",
    "ReadRequest",
    "ReadResult",
    "SecretPromptSession",
    "SendOperation",
    "SendRequest",
    "SendResult",
    "SessionStatus",
    "SignalResult",
    "Snapshot",
    "SpawnRequest",
    "SpawnResult",
    "TerminalBackend",
    "TerminalError",
    "TerminalSessionService",
    "WaitReason",
    "status_text",
]
