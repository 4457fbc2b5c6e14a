"""Asking the person at the client to take a terminal over: what a host provides (SPEC §22).

``terminal_ask_human`` opens a control link to a session and has it shown to the
person through a :data:`HumanAsker` when the host has one (the MCP server makes one per
call, over URL-mode elicitation); an in-process host implements the ``dsh_ask_human``
hook instead.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import attrs

__all__ = ["HumanAnswer", "HumanAsk", "HumanAsker"]


@attrs.frozen(kw_only=True)
class HumanAsk:
    """What the person is shown: the session, why the agent asks, the link and its end."""

    session_id: str
    reason: str
    url: str
    expires_at: float


HumanAnswer = Literal["accept", "decline", "cancel", "unavailable"]

HumanAsker = Callable[[HumanAsk], Awaitable[HumanAnswer]]
"""Shows the person the link; ``accept`` (they will open it), ``decline``, ``cancel``, or
``unavailable`` when this client cannot show a link (the tool returns it in its text)."""
