"""Wake connected MCP clients with their agent's notices instead of making them poll (§19.5).

Every client connection that completes the handshake of the 2025-11-25 protocol era (the
stateful one, with a standalone stream and ``logging/setLevel``) is subscribed to the
notices of the agent it acts as: on stdio the connection's one agent, over HTTP its
identity's, so each of an identity's connections is woken and no other identity's ever
is. An announced notice (:mod:`.mcp_notify`) becomes a ``notifications/message`` at
``info`` from logger ``dsh-terminal`` on the connection's standalone stream.

The notifier never waits for a client: the agent's listener only filters and queues
(bounded, the oldest dropped when a client falls behind) and one task per connection
sends. A connection that has gone quiet or dead simply loses what it was sent; the
``[notice]`` line of the next result still carries every notice. The subscription ends
with the connection (the SDK unwinds the connection's exit stack however it ends).

``logging/setLevel`` is answered here: the level is kept per connection and a client
that asked for a level above ``info`` (``notice``, ``warning``...) is sent none of these.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from .agents import Agent, Notice
from .mcp_notify import LEVEL, LOGGER, delivered_at, notification_data

if TYPE_CHECKING:
    import mcp_types
    from mcp.server import ServerRequestContext
    from mcp.server.connection import Connection
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession

__all__ = ["QUEUE_BOUND", "ClientWake", "attach", "install"]

QUEUE_BOUND: Final = 64
"""Notifications kept per connection while its client is not reading; older ones drop."""

_STATE_KEY: Final = "dsh.wake"

log = logging.getLogger("dsh_terminal_core.mcp_server")

AgentOf = Callable[["ServerRequestContext[Any]"], Agent]


class ClientWake:
    """One client connection's subscription: the agent it follows, its level, its sender.

    Made by :func:`attach` inside a request or notification handler (it needs the running
    loop). ``session`` is any :class:`ServerSession` of the connection: its log messages
    sent without a related request go on the connection's standalone stream.
    """

    def __init__(self, session: ServerSession, agent: Agent) -> None:
        self.level: str | None = None
        self._session = session
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(QUEUE_BOUND)
        self._agent = agent
        self._unsubscribe = agent.on_notice(self._offer)
        self._closed = False
        self._warned_slow = False
        self._sender = self._loop.create_task(self._send_all(), name=f"dsh-wake {agent.id}")

    @property
    def agent(self) -> Agent:
        return self._agent

    @property
    def closed(self) -> bool:
        return self._closed

    def follow(self, agent: Agent) -> None:
        """Listen to ``agent`` from now on (an HTTP identity reaped and made anew)."""
        if self._closed or agent is self._agent:
            return
        self._unsubscribe()
        self._agent = agent
        self._unsubscribe = agent.on_notice(self._offer)

    def _offer(self, notice: Notice) -> None:
        # The level is read now, at the event, so what a client asked for before it
        # happened decides, however late the sender gets to it.
        data = notification_data(notice)
        if data is None or self._closed or not delivered_at(self.level):
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._queue_up(data)
        else:
            self._loop.call_soon_threadsafe(self._queue_up, data)

    def _queue_up(self, data: dict[str, Any]) -> None:
        if self._closed:
            return
        if self._queue.full():
            dropped = self._queue.get_nowait()
            # Once per connection: a client stuck for good would otherwise fill the log.
            log.log(
                logging.DEBUG if self._warned_slow else logging.WARNING,
                "a client of %r is not reading; dropped its oldest %s notification",
                self._agent.id,
                dropped.get("event"),
            )
            self._warned_slow = True
        self._queue.put_nowait(data)

    async def _send_all(self) -> None:
        from mcp.shared.exceptions import MCPDeprecationWarning

        while True:
            data = await self._queue.get()
            try:
                # Deprecated only for the 2026 era, where the SDK's own gate drops it; the
                # warning is raised when the coroutine is made, so only that is muffled.
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    sending = self._session.send_log_message(LEVEL, data, logger=LOGGER)
                await sending
            except Exception as exc:  # the connection is gone: stop following quietly
                log.debug(
                    "dropping a client of %r that cannot be written to: %s", self._agent.id, exc
                )
                self.close()
                return

    def close(self) -> None:
        """Stop following the agent and stop sending; harmless twice."""
        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        if self._sender is not asyncio.current_task():
            self._sender.cancel()

    async def aclose(self) -> None:
        """:meth:`close`, then wait for the sender to have stopped."""
        self.close()
        if self._sender is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(self._sender, return_exceptions=True)


def _connection_of(ctx: ServerRequestContext[Any]) -> Connection:
    # The SDK's lowlevel handlers get no public path to their Connection (its richer
    # ``Context.connection`` is not what the runner builds); the session holds it, and
    # its ``state`` and ``exit_stack`` are the documented per-connection hooks.
    connection: Connection = ctx.session._connection
    return connection


def attach(ctx: ServerRequestContext[Any], agent: Agent) -> ClientWake | None:
    """Subscribe the connection carrying ``ctx`` to ``agent``'s notices; idempotent.

    Returns the connection's :class:`ClientWake` (an existing one now follows ``agent``),
    or ``None`` on the 2026-07-28 era, whose clients are reached through
    ``subscriptions/listen`` instead (not served yet).
    """
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return None
    connection = _connection_of(ctx)
    client = connection.state.get(_STATE_KEY)
    if isinstance(client, ClientWake):
        client.follow(agent)
        return client
    client = ClientWake(ctx.session, agent)
    connection.state[_STATE_KEY] = client
    connection.exit_stack.push_async_callback(client.aclose)
    return client


def install(server: Server[Any], agent_of: AgentOf) -> None:
    """Make ``server`` subscribe each client at its handshake and answer ``logging/setLevel``.

    Registered as plain handlers (not the constructor's deprecated ``on_set_logging_level``)
    so building the server warns about nothing; the logging capability is advertised
    because the handler exists.
    """
    import mcp_types as types

    async def initialized(
        ctx: ServerRequestContext[Any], _params: types.NotificationParams
    ) -> None:
        attach(ctx, agent_of(ctx))

    async def set_level(
        ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> mcp_types.EmptyResult:
        client = attach(ctx, agent_of(ctx))
        if client is not None:
            client.level = params.level
        return types.EmptyResult()

    server.add_notification_handler(
        "notifications/initialized", types.NotificationParams, initialized
    )
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
