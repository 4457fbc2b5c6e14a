"""dsh-terminal pty facade: ``ctx.pty`` and the ``pty_*`` tools."""

from .config import PtySessionConfig
from .quoting import export_line, quote
from .service import PtyOpened, PtySent, PtySessionService, PtyTail

__all__ = ["PtyOpened", "PtySent", "PtySessionConfig", "PtySessionService", "PtyTail", "export_line", "quote"]
