"""What a terminal shows, as text: the text view of the watch page and the overview's thumbnails."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..kernel.agents import Agent
from ..kernel.errors import TerminalError
from ..registry import ReadRequest, status_text

if TYPE_CHECKING:
    from .service import HumanService

__all__ = ["LINES_SHOWN", "text_view"]

LINES_SHOWN = 200
"""How many of a line session's last lines the text view shows."""
_VIEW_BYTES = 256 * 1024


def text_view(
    service: HumanService, owner: Agent, session_id: str, screen: bool | None, lines: int = LINES_SHOWN
) -> tuple[dict[str, Any], bool]:
    """What the terminal shows now: a screen session's screen, a line session's tail."""
    terminals = service.terminals
    try:
        session = terminals.get_session(owner, session_id)
    except TerminalError:
        return {"text": "", "status": "closed"}, bool(screen)
    status = status_text(session.status.to_wire())
    if screen is not False:
        try:
            read = terminals.read_screen(owner, session_id)
        except TerminalError:
            screen = False
        else:
            return {
                "text": read.screen.text,
                "cursor": list(read.screen.cursor),
                "rows": read.rows,
                "cols": read.cols,
                "status": status,
            }, True
    total = terminals.read(owner, session_id, ReadRequest(offset=1, count=1))
    page = terminals.read(
        owner,
        session_id,
        ReadRequest(
            offset=max(1, total.total_lines - lines + 1), count=lines, max_bytes=_VIEW_BYTES
        ),
    )
    return {"text": page.text, "lineEnd": page.line_end, "status": status}, False
