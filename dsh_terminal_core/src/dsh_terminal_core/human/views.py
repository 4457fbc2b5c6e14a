"""What a terminal shows, as text: the text view of the watch page and the overview's thumbnails."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..kernel.agents import Agent
from ..kernel.errors import TerminalError
from ..registry import ReadRequest, status_text

if TYPE_CHECKING:
    from .service import HumanService

__all__ = ["LINES_SHOWN", "screen_replay", "text_view"]

LINES_SHOWN = 200
"""How many of a line session's last lines the text view shows."""
_VIEW_BYTES = 256 * 1024


def text_view(
    service: HumanService,
    owner: Agent,
    session_id: str,
    screen: bool | None,
    lines: int = LINES_SHOWN,
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


def screen_replay(
    service: HumanService, owner: Agent, session_id: str, modes: bytes
) -> bytes | None:
    """A screen session's screen as bytes that draw it on a fresh terminal, or None.

    For a page whose replay would start late (older output was cut): the screen model
    says what the screen holds now — the text, the cursor, the alternate screen — and
    ``modes`` (from the byte tap) the keys' and cursor's modes. Colours come back as the
    program redraws.
    """
    try:
        read = service.terminals.read_screen(owner, session_id)
    except TerminalError:
        return None
    screen = read.screen
    rows = screen.text.split("\n")[: read.rows]
    body = "\r\n".join(row[: read.cols] for row in rows).encode("utf-8")
    row, col = screen.cursor
    return b"".join(
        (
            b"\x1b[?1049h" if screen.alternate else b"",
            b"\x1b[H\x1b[2J",
            body,
            b"\x1b[%d;%dH" % (row + 1, col + 1),
            modes,
        )
    )
