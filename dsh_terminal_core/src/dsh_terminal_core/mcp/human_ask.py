"""``terminal_ask_human`` over MCP: the control link offered by URL-mode elicitation (§22).

On 2025-11-25 the server sends ``elicitation/create`` with ``mode: "url"`` and the
session's control link, as for a secret (:mod:`.secret_page`); the client shows it to
its person, who opens it, takes control, types and hands back. The client's answer says
only whether they agreed to open it; the tool waits for the hand-back itself. A client
without URL-mode elicitation, or one that fails to show it, is ``unavailable``: the tool
returns the link in its text. The 2026-07-28 revision has no server-initiated requests,
and the multi round-trip a secret uses would end the call before the person hands back:
there a client of the MCP tasks extension gets the ask as a task in ``input_required``
(:mod:`.tasks`), and any other client the answer ``unavailable``.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any

from ..kernel.humanask import HumanAnswer, HumanAsk
from .secret_page import supports_url_elicitation

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

__all__ = ["ask_human_by_url", "ask_message", "no_human_asks"]

log = logging.getLogger(__name__)


def ask_message(ask: HumanAsk) -> str:
    """What the client shows its person beside the link."""
    return (
        f"The assistant asks you to take over terminal session {ask.session_id}: "
        f"{ask.reason}. Open the link, press 'Take control', do what is needed and press "
        "'Hand back'. Anyone with this link can type into the terminal: keep it to yourself."
    )


async def ask_human_by_url(ctx: ServerRequestContext[Any], ask: HumanAsk) -> HumanAnswer:
    """Offer the person at the client of ``ctx`` the control link of ``ask``."""
    if not supports_url_elicitation(ctx):
        return "unavailable"
    related = ctx.request_id if ctx.session.can_send_request else None
    try:
        answer = await ctx.session.elicit_url(
            ask_message(ask), ask.url, secrets.token_urlsafe(16), related_request_id=related
        )
    except Exception as exc:  # the client could not show it: hand the link back instead
        log.info("the client did not show the control link: %s", type(exc).__name__)
        return "unavailable"
    action = answer.action
    return action if action in ("accept", "decline", "cancel") else "decline"


async def no_human_asks(_ask: HumanAsk) -> HumanAnswer:
    """The asker of a 2026-07-28 call without the tasks extension: it cannot wait mid-call."""
    return "unavailable"
