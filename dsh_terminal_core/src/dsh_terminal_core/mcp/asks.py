"""Asking the person for a secret on the stateless 2026-07-28 revision: multi round-trip requests.

That revision has no server-initiated requests, so the URL-mode elicitation of
:mod:`.mcp_secrets` travels inside the call's own result. A ``tools/call`` that asks
opens the same one-time page and returns ``input_required``: the elicitation (its
message and the page's URL) under the key ``secret``, and a ``requestState`` naming
the ask. The client shows the URL to its person, who types the secret into the page
(browser → server → terminal, never through the client), and retries the call with
the person's answer in ``inputResponses`` and the state echoed back. The retry runs
the tool again; at its ask it finds the answer: ``accept`` waits for the page's
submission (or its expiry, ``NO_SECRET``), ``decline`` or ``cancel`` is
``SECRET_DECLINED``. The page stays what it is on 2025-11-25: one submission, five
minutes; it is withdrawn once a retry has answered it, however that ends.

The state carries no secret and no page address, only a random id of the ask, and
the server refuses any it did not mint for this caller: the SDK's
:class:`~mcp.server.request_state.RequestStateBoundary` seals it with AES-256-GCM under
a key made at startup (the client can neither read nor alter it), binds it to the
tool, its arguments, this server and the identity of the caller, and lets it expire a
minute after the page. The ask itself is remembered with the identity that made it
and is used once: a replayed state, or one whose page is gone, answers ``NO_SECRET``.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from ..kernel.agents import Agent
from ..kernel.errors import DshError
from ..kernel.secret import Secret, SecretAsk
from .secret_page import SecretPage, SecretPages, ask_message, declined, supports_url_elicitation

if TYPE_CHECKING:
    import mcp_types
    from mcp.server import ServerRequestContext
    from mcp.server.request_state import RequestStateBoundary

__all__ = ["INPUT_KEY", "AskRound", "PendingAsks", "request_state_boundary"]

INPUT_KEY: Final = "secret"
"""The key of the elicitation in ``inputRequests`` and of its answer in ``inputResponses``."""

_STATE_VERSION: Final = 1
# The state outlives its page a little, so that a retry with an expired page is told
# NO_SECRET by the tool rather than "invalid requestState" by the protocol.
_STATE_SLACK_S: Final = 60.0


def request_state_boundary(
    valid_s: float, principal: Callable[[ServerRequestContext[Any]], str], audience: str
) -> RequestStateBoundary:
    """The SDK middleware sealing ``requestState``: a per-process key, bound to the caller.

    ``principal`` names the identity a request acts as (its agent id); a state minted
    for one identity is refused for every other.
    """
    from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity

    security = RequestStateSecurity(
        keys=[os.urandom(32)],
        ttl=valid_s + _STATE_SLACK_S,
        bind_principal=principal,
    )
    return RequestStateBoundary(security, default_audience=audience)


class _InputRequired(Exception):
    """Stops a tool at its ask, before it writes; the round returns ``input_required``.

    Not a :class:`DshError`: it never reaches anyone as an error. The tool registry
    turns it into an error result like any failure, and the caller discards that.
    """


@attrs.frozen
class _Pending:
    agent_id: str
    page: SecretPage


class PendingAsks:
    """Asks sent to a person and awaiting the client's retry, each by a random id, once."""

    def __init__(self, pages: SecretPages) -> None:
        self.pages = pages
        self._asks: dict[str, _Pending] = {}

    async def open(self, agent: Agent, ask: SecretAsk) -> tuple[str, SecretPage]:
        """Open a page for ``ask`` by ``agent``; return the ask's id and the page."""
        # Pages close on their own (expiry, the page limit); forget their asks then, and
        # a submitted one's once its retry can no longer come.
        for ask_id in [key for key, pending in self._asks.items() if _stale(pending.page)]:
            del self._asks[ask_id]
        page = await self.pages.open(ask)
        ask_id = secrets.token_urlsafe(16)
        self._asks[ask_id] = _Pending(agent.id, page)
        return ask_id, page

    def take(self, ask_id: str, agent: Agent) -> _Pending | None:
        """``agent``'s ask with this id, forgotten at once: a state works for one retry.

        Another identity's ask is neither returned nor spent.
        """
        pending = self._asks.get(ask_id)
        if pending is None or pending.agent_id != agent.id:
            return None
        return self._asks.pop(ask_id)

    def __len__(self) -> int:
        return len(self._asks)


def _no_secret(message: str) -> DshError:
    return DshError(f"{message}; nothing was sent", "NO_SECRET")


class AskRound:
    """One round of one ``tools/call`` on 2026-07-28: the tool's secret asker and its outcome.

    ``ask`` is handed to the tool as its ``ask_secret``. In a first round it opens the
    page and stops the tool (nothing has been typed: a tool asks before it writes);
    :attr:`input_required` is then the result to return instead of the tool's. In a
    retry it answers from ``inputResponses``. :meth:`finish` withdraws whatever page
    this round was answering, whether or not the tool got as far as asking.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any],
        asks: PendingAsks,
        agent: Agent,
        params: mcp_types.CallToolRequestParams,
    ) -> None:
        self._ctx = ctx
        self._asks = asks
        self._agent = agent
        self._responses = params.input_responses or {}
        self._answering: _Pending | None = None
        self._state_given = params.request_state is not None
        if params.request_state is not None:
            ask_id = _ask_id(params.request_state)
            self._answering = asks.take(ask_id, agent) if ask_id is not None else None
        self.input_required: mcp_types.InputRequiredResult | None = None

    async def ask(self, ask: SecretAsk) -> Secret:
        if self._state_given:
            return await self._answer(ask)
        if self.input_required is not None:
            raise _no_secret("a call asks its person once per round")
        return await self._first(ask)

    async def _first(self, ask: SecretAsk) -> Secret:
        import mcp_types as types

        if not supports_url_elicitation(self._ctx):
            raise _no_secret(
                "the MCP client does not declare URL-mode elicitation, so the person cannot "
                "be asked for the secret without it passing through the client; use a named "
                "secret instead"
            )
        ask_id, page = await self._asks.open(self._agent, ask)
        elicit = types.ElicitRequest(
            params=types.ElicitRequestURLParams(message=ask_message(ask), url=page.url)
        )
        self.input_required = types.InputRequiredResult(
            input_requests={INPUT_KEY: elicit},
            request_state=json.dumps({"v": _STATE_VERSION, "ask": ask_id}),
        )
        raise _InputRequired

    async def _answer(self, ask: SecretAsk) -> Secret:
        import mcp_types as types

        pending = self._answering
        if pending is None:
            raise _no_secret(
                "the secret page this retry answers is gone (already answered, expired, or "
                "never made for this caller); ask again"
            )
        page = pending.page
        if page.ask.session_id != ask.session_id or page.state in ("expired", "withdrawn"):
            raise _no_secret(
                f"the secret page for session {page.ask.session_id} has expired or was "
                "withdrawn; ask again"
            )
        answer = self._responses.get(INPUT_KEY)
        if not isinstance(answer, types.ElicitResult):
            raise _no_secret("the client retried without the person's answer to the secret page")
        if answer.action != "accept":
            raise DshError(
                f"the person {declined(answer.action)} the request for a secret for session "
                f"{ask.session_id}; nothing was sent",
                "SECRET_DECLINED",
            )
        return await page.submitted

    def finish(self) -> None:
        """Withdraw the page this round answered; harmless when there was none."""
        if self._answering is not None:
            self._answering.page.withdraw()


def _stale(page: SecretPage) -> bool:
    if page.state in ("expired", "withdrawn"):
        return True
    return time.time() > page.expires_at + _STATE_SLACK_S


def _ask_id(state: str) -> str | None:
    """The ask a (verified) state names; ``None`` for a state of another shape."""
    try:
        value = json.loads(state)
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("v") != _STATE_VERSION:
        return None
    ask_id = value.get("ask")
    return ask_id if isinstance(ask_id, str) else None
