"""dsh-terminal pty facade: ``ctx.pty`` and the ``pty_*`` tools.

Plugin authors inject ``pty`` and call :class:`PtySessionService` (``open``, ``send``,
``tail``, ``close``) with their caller's agent as owner; models use the four tools.
"""

from .config import PtySessionConfig
from .quoting import export_line, quote
from .service import PtySessionService
from .types import LineTailSession, PtyOpened, PtyRegistry, PtySent, PtyTail

__all__ = [
    "LineTailSession",
    "PtyOpened",
    "PtyRegistry",
    "PtySent",
    "PtySessionConfig",
    "PtySessionService",
    "PtyTail",
    "export_line",
    "quote",
]
