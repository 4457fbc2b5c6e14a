"""dsh-terminal pty facade: ``ctx.pty`` and the ``pty_*`` tools.

Plugin authors inject ``pty`` and call :class:`PtySessionService` (``open``, ``send``,
``tail``, ``wait``, ``close``) with their caller's agent as owner; models use the four tools.
"""

from .config import PtySessionConfig
from .quoting import export_line, quote
from .service import PtySessionService
from .types import (
    LineTailSession,
    LineWaitSession,
    PtyOpened,
    PtyRegistry,
    PtySent,
    PtyTail,
    PtyWaited,
    WaitEnd,
)

__all__ = [
    "LineTailSession",
    "LineWaitSession",
    "PtyOpened",
    "PtyRegistry",
    "PtySent",
    "PtySessionConfig",
    "PtySessionService",
    "PtyTail",
    "PtyWaited",
    "WaitEnd",
    "export_line",
    "quote",
]
