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

The 2026-07-28 revision has no handshake, no standing stream and no
``logging/setLevel``: a client opens a stream by sending ``subscriptions/listen``,
whose response is that stream, and log delivery is an opt-in of the request it rides
(``_meta["io.modelcontextprotocol/logLevel"]``). So a listen request that opted in at
``info`` or below gets the same notifications, for the agent it acts as, each tagged
with the stream's ``subscriptionId``; one that did not opt in gets none (the revision
forbids them), only the acknowledgment. Every change-notification kind it asks for is
honoured and never fires: the tool list does not change. :class:`Listens` ends every
open stream gracefully at shutdown (the stream's result is its last frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from ..kernel.agents import Agent, Notice
from .notify import LEVEL, LOGGER, delivered_at, notification_data

if TYPE_CHECKING:
    import mcp_types
    from mcp.server import ServerRequestContext
    from mcp.server.connection import Connection
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession

__all__ = ["QUEUE_BOUND", "ClientWake", "Listens", "attach", "install"]

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
        _on_loop(self._loop, self._queue_up, data)

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
    ``subscriptions/listen`` instead (:class:`Listens`).
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


_TASK: Final = "dsh.task"
"""Marks a queued item as a task's new status (``notifications/tasks``), not a notice."""


class _ListenStream:
    """The notices of one agent, queued for one ``subscriptions/listen`` stream.

    A stream opened by a request that declares the tasks extension also carries the
    status changes of the agent's tasks (:meth:`Listens.tell_task`).
    """

    def __init__(self, agent: Agent, tasks: bool = False) -> None:
        self._loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(QUEUE_BOUND)
        self._agent = agent
        self.tasks = tasks
        self._unsubscribe = agent.on_notice(self._offer)

    @property
    def agent_id(self) -> str:
        return self._agent.id

    def tell_task(self, fields: dict[str, Any]) -> None:
        _on_loop(self._loop, self._put, {_TASK: fields})

    def _offer(self, notice: Notice) -> None:
        data = notification_data(notice)
        if data is None:
            return
        _on_loop(self._loop, self._put, data)

    def _put(self, data: dict[str, Any] | None) -> None:
        if self.queue.full():
            dropped = self.queue.get_nowait()
            log.debug("a listen stream of %r is not reading; dropped %s", self._agent.id, dropped)
        self.queue.put_nowait(data)

    def end(self) -> None:
        """Let the stream finish what is queued, then close gracefully."""
        self._unsubscribe()
        self._loop.call_soon_threadsafe(self._put, None)

    def close(self) -> None:
        self._unsubscribe()


class Listens:
    """The open ``subscriptions/listen`` streams of one server (2026-07-28)."""

    def __init__(self) -> None:
        self._streams: set[_ListenStream] = set()

    def close(self) -> None:
        """End every open stream gracefully; each sends its result as its last frame."""
        for stream in list(self._streams):
            stream.end()

    def __len__(self) -> int:
        return len(self._streams)

    def tell_task(self, agent_id: str, fields: dict[str, Any]) -> None:
        """Announce a task's new status on ``agent_id``'s streams that asked for tasks."""
        for stream in list(self._streams):
            if stream.tasks and stream.agent_id == agent_id:
                stream.tell_task(fields)

    async def serve(
        self,
        ctx: ServerRequestContext[Any],
        agent: Agent,
        params: mcp_types.SubscriptionsListenRequestParams,
    ) -> mcp_types.SubscriptionsListenResult:
        """Serve one listen stream until the client closes it or :meth:`close`."""
        import mcp_types as types
        from mcp.server.connection import allowed_log_levels
        from mcp.shared.exceptions import MCPError
        from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        wanted = params.notifications
        honored = types.SubscriptionFilter(
            tools_list_changed=True if wanted.tools_list_changed else None,
            prompts_list_changed=True if wanted.prompts_list_changed else None,
            resources_list_changed=True if wanted.resources_list_changed else None,
            resource_subscriptions=list(wanted.resource_subscriptions or ()) or None,
        )
        stream = _ListenStream(agent, tasks=_declares_tasks(ctx))
        if LEVEL not in allowed_log_levels(ctx.protocol_version, ctx.meta):
            stream.close()  # not opted in: the revision forbids sending any
        self._streams.add(stream)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=subscription_id,
            )
            while (data := await stream.queue.get()) is not None:
                if _TASK in data:
                    await ctx.session.send_notification(
                        _task_notification(data[_TASK], meta), related_request_id=subscription_id
                    )
                    continue
                await ctx.session.send_notification(
                    types.LoggingMessageNotification(
                        params=types.LoggingMessageNotificationParams(
                            level=LEVEL, logger=LOGGER, data=data, _meta=meta
                        )
                    ),
                    related_request_id=subscription_id,
                )
        finally:
            stream.close()
            self._streams.discard(stream)
        return types.SubscriptionsListenResult(_meta=meta)


def _declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    from .tasks import declares_tasks

    return declares_tasks(ctx)


def _task_notification(fields: dict[str, Any], meta: dict[str, Any]) -> Any:
    """``notifications/tasks`` with a task's fields (SEP-2663), tagged with the stream."""
    notification, params = _task_notification_types()
    return notification(params=params.model_validate({**fields, "_meta": meta}))


@functools.cache
def _task_notification_types() -> tuple[Any, Any]:
    """The SDK has no model for the extension's notification: one made once, here."""
    from typing import Literal

    import mcp_types as types
    from pydantic import ConfigDict

    class TaskStatusParams(types.NotificationParams):
        model_config = ConfigDict(extra="allow")

    class TaskStatus(types.Notification[TaskStatusParams, Literal["notifications/tasks"]]):
        method: Literal["notifications/tasks"] = "notifications/tasks"
        params: TaskStatusParams

    return TaskStatus, TaskStatusParams


def install(server: Server[Any], agent_of: AgentOf, listens: Listens) -> None:
    """Make ``server`` wake its clients on both revisions.

    On 2025-11-25 each client is subscribed at its handshake and ``logging/setLevel`` is
    answered; on 2026-07-28 ``subscriptions/listen`` is served by ``listens``.
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

    async def listen(
        ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> mcp_types.SubscriptionsListenResult:
        return await listens.serve(ctx, agent_of(ctx), params)

    server.add_request_handler(
        "subscriptions/listen", types.SubscriptionsListenRequestParams, listen
    )


def _on_loop(
    loop: asyncio.AbstractEventLoop, step: Callable[[dict[str, Any]], None], data: dict[str, Any]
) -> None:
    """Run ``step(data)`` on ``loop``: now when called there, else soon from any thread
    (``Agent.notify`` may be called from another thread)."""
    try:
        here = asyncio.get_running_loop() is loop
    except RuntimeError:
        here = False
    if here:
        step(data)
    else:
        loop.call_soon_threadsafe(step, data)
