"""MCP tasks on 2026-07-28: long sends and asks of a person outlive their request (SPEC §30.2).

The stateless revision has no server-initiated requests and a request lives only as long
as its POST, so a call that waits for a person (``terminal_ask_human``, a secret typed
into a page) or for a long command cannot wait inside one request. The
``io.modelcontextprotocol/tasks`` extension (SEP-2663) is how that revision carries such
work; a client that declares it in a request's capabilities gets it:

- the server decides, not the client: a ``tools/call`` still running after
  :data:`TASK_AFTER_S`, or one that needs its person, is answered with a
  ``CreateTaskResult`` (``resultType: "task"``, the task's fields at top level) and goes
  on running; a call done sooner answers as usual (the revision's immediate-result
  shortcut), so a quick ``echo`` costs nothing more;
- ``tasks/get`` reports ``working``, ``input_required`` (with ``inputRequests``: the
  URL-mode elicitation of the person's page or control link), or the outcome inlined: a
  finished call, tool errors included, is ``completed`` with its ``result``; only a call
  that broke outside the tool's own error handling is ``failed`` with an ``error``;
- ``tasks/update {inputResponses}`` answers the person's ask and the call goes on; the
  secret itself still goes browser → server → terminal, never through the client;
- ``tasks/cancel`` cancels the call the way a client's cancellation does everywhere
  else: a send in flight gets a real Ctrl-C and the session takes the next send;
- every change of status is announced as ``notifications/tasks`` on the identity's
  ``subscriptions/listen`` streams (:mod:`.wake`).

A client that does not declare the extension never sees any of this: its calls answer as
before, and ``tasks/*`` requests are refused with ``-32021`` (missing client capability).
Tasks belong to the identity that made them; another identity's task id is unknown to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs

from ..kernel.errors import DshError
from ..kernel.humanask import HumanAnswer, HumanAsk
from ..kernel.secret import Secret, SecretAsk
from .human_ask import ask_message as human_ask_message
from .secret_page import SecretPages, ask_message, declined

if TYPE_CHECKING:
    import mcp_types
    from mcp.server import ServerRequestContext
    from mcp.server.lowlevel import Server

__all__ = ["TASKS_EXTENSION", "TASK_AFTER_S", "McpTask", "Tasks", "declares_tasks"]

TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

TASK_AFTER_S: Final = 0.5
"""A call still running this long after it arrived becomes a task (a person's ask at once)."""

TTL_MS: Final = 3_600_000
"""How long a task's outcome is kept once it has ended (a running task is kept until then)."""

POLL_INTERVAL_MS: Final = 250
"""The polling pace suggested to clients; status notifications make it a fallback."""

_HEADER_MISMATCH: Final = -32020

HUMAN_KEY: Final = "human"
SECRET_KEY: Final = "secret"

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
_TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})

log = logging.getLogger(__name__)

Announce = Callable[[str, dict[str, Any]], None]
"""Tell an identity's listen streams of a task's new status: (agent id, task fields)."""


def declares_tasks(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request of ``ctx`` declares the tasks extension in its capabilities."""
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return bool(extensions) and TASKS_EXTENSION in extensions  # type: ignore[operator]


def _now() -> str:
    return (
        datetime.datetime.now(datetime.UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


@attrs.define(eq=False)
class McpTask:
    """One call running as a task: its status, its outcome once known, its pending ask."""

    id: str
    owner: str
    created_at: str = attrs.field(factory=_now)
    last_updated_at: str = attrs.field(factory=_now)
    ended: float | None = None  # monotonic time it reached a terminal status
    status: Status = "working"
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None
    runner: asyncio.Task[Any] | None = None
    # Set when the call first needs its person: the call becomes a task at once.
    needs_person: asyncio.Event = attrs.field(factory=asyncio.Event)
    announce: Callable[[McpTask], None] = lambda _task: None
    _answers: dict[str, asyncio.Future[Any]] = attrs.field(factory=dict)

    def fields(self) -> dict[str, Any]:
        """The task's own fields, as ``CreateTaskResult`` and ``tasks/get`` carry them."""
        wire: dict[str, Any] = {
            "taskId": self.id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.last_updated_at,
            "ttlMs": TTL_MS,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if self.status_message is not None:
            wire["statusMessage"] = self.status_message
        return wire

    def detailed(self) -> dict[str, Any]:
        """``tasks/get``: the fields and whichever of result, error, inputRequests applies."""
        wire = {"resultType": "complete", **self.fields()}
        if self.status == "completed" and self.result is not None:
            wire["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            wire["error"] = self.error
        elif self.status == "input_required" and self.input_requests is not None:
            wire["inputRequests"] = self.input_requests
        return wire

    def set_status(self, status: Status, message: str | None = None) -> None:
        if self.status in _TERMINAL:
            return  # terminal states never change
        self.status = status
        self.status_message = message
        self.last_updated_at = _now()
        if status in _TERMINAL:
            self.ended = time.monotonic()
        self.announce(self)

    async def ask(self, key: str, request: mcp_types.ElicitRequest, why: str) -> Any:
        """Put the call in ``input_required`` with ``request``; return the client's answer."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[key] = future
        self.input_requests = {key: request.model_dump(by_alias=True, exclude_none=True)}
        self.set_status("input_required", why)
        self.needs_person.set()
        try:
            answer = await future
        finally:
            self._answers.pop(key, None)
            self.input_requests = None
        self.set_status("working")  # not when cancelled: that status is the caller's to set
        return answer

    def answer(self, responses: dict[str, Any]) -> None:
        """Deliver ``tasks/update``'s answers to the asks they name; others are ignored."""
        for key, value in responses.items():
            future = self._answers.get(key)
            if future is not None and not future.done():
                future.set_result(value)

    def expired(self) -> bool:
        """Ended more than the TTL ago (a running task is never dropped)."""
        return self.ended is not None and time.monotonic() - self.ended > TTL_MS / 1000


ToolCall = Callable[[McpTask], Awaitable["mcp_types.CallToolResult"]]
"""Run the tool with this task's askers; returns the call's MCP result."""


class Tasks:
    """The tasks of every identity of one server, and the ``tasks/*`` handlers."""

    def __init__(self, pages: SecretPages, owner_of: Callable[[ServerRequestContext[Any]], str]):
        self._pages = pages
        self._owner_of = owner_of
        self._tasks: dict[str, McpTask] = {}
        self.announce: Announce = lambda _owner, _fields: None

    # -- tools/call ------------------------------------------------------------------

    async def call(
        self, ctx: ServerRequestContext[Any], run: ToolCall
    ) -> mcp_types.CallToolResult | dict[str, Any]:
        """Run one ``tools/call``: its result when quick, else a ``CreateTaskResult``."""
        self._prune()
        task = McpTask(id=secrets.token_urlsafe(12), owner=self._owner_of(ctx))
        task.announce = self._announced
        task.runner = asyncio.get_running_loop().create_task(self._run(task, run))
        person = asyncio.ensure_future(task.needs_person.wait())
        try:
            await asyncio.wait(
                {task.runner, person}, timeout=TASK_AFTER_S, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            # The client went away before the call became a task: cancel it as any call.
            task.runner.cancel()
            raise
        finally:
            person.cancel()
        if task.runner.done() and not task.needs_person.is_set():
            if task.status == "failed":
                from mcp.shared.exceptions import MCPError

                raise MCPError(-32603, str(task.status_message))
            result: mcp_types.CallToolResult = task.runner.result()
            return result
        self._tasks[task.id] = task  # durable before the client learns its id
        self.announce(task.owner, task.fields())  # its status so far, now that it is one
        return {"resultType": "task", **task.fields()}

    async def _run(self, task: McpTask, run: ToolCall) -> Any:
        try:
            result = await run(task)
        except asyncio.CancelledError:
            task.set_status("cancelled", "cancelled by the client")
            raise
        except Exception as exc:  # outside the tool's own error handling: a failed task
            log.exception("task %s failed", task.id)
            task.error = {"code": -32603, "message": f"{type(exc).__name__}: {exc}"}
            task.set_status("failed", str(exc) or type(exc).__name__)
            return None
        task.result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        task.set_status("completed")
        return result

    def _announced(self, task: McpTask) -> None:
        if task.id in self._tasks:
            self.announce(task.owner, task.fields())

    def _prune(self) -> None:
        for task_id in [key for key, task in self._tasks.items() if task.expired()]:
            task = self._tasks.pop(task_id)
            if task.runner is not None:
                task.runner.cancel()

    # -- the askers a task hands its tool ---------------------------------------------

    def ask_secret(self, task: McpTask) -> Callable[[SecretAsk], Awaitable[Secret]]:
        """A secret asker: the person's page as an ``input_required`` URL elicitation."""
        import mcp_types as types

        async def ask(secret_ask: SecretAsk) -> Secret:
            page = await self._pages.open(secret_ask)
            request = types.ElicitRequest(
                params=types.ElicitRequestURLParams(message=ask_message(secret_ask), url=page.url)
            )
            asking = asyncio.ensure_future(task.ask(SECRET_KEY, request, "a person is needed"))
            try:
                await asyncio.wait({asking, page.submitted}, return_when=asyncio.FIRST_COMPLETED)
                if not asking.done():
                    # The page was submitted (or expired) before the client's answer came:
                    # the page decides, as the person evidently did.
                    task.set_status("working")
                    return await page.submitted
                answer = _elicit_result(asking.result())
                if answer is None or answer.action != "accept":
                    action = "cancel" if answer is None else answer.action
                    raise DshError(
                        f"the person {declined(action)} the request for a secret for session "
                        f"{secret_ask.session_id}; nothing was sent",
                        "SECRET_DECLINED",
                    )
                return await page.submitted
            finally:
                asking.cancel()
                page.withdraw()

        return ask

    def ask_human(self, task: McpTask) -> Callable[[HumanAsk], Awaitable[HumanAnswer]]:
        """A person asker: the control link as an ``input_required`` URL elicitation."""
        import mcp_types as types

        async def ask(human_ask: HumanAsk) -> HumanAnswer:
            request = types.ElicitRequest(
                params=types.ElicitRequestURLParams(
                    message=human_ask_message(human_ask), url=human_ask.url
                )
            )
            # No answer by the link's end: the tool reports what the link saw (expired, or
            # handed back by a person who opened it without their client answering).
            wait_s = max(0.0, human_ask.expires_at - time.time())
            try:
                given = await asyncio.wait_for(
                    task.ask(HUMAN_KEY, request, "a person is needed"), wait_s
                )
            except TimeoutError:
                task.set_status("working")
                return "accept"
            answer = _elicit_result(given)
            if answer is None:
                return "cancel"
            action = answer.action
            return action if action in ("accept", "decline", "cancel") else "decline"

        return ask

    # -- tasks/get, tasks/update, tasks/cancel ----------------------------------------

    def install(self, server: Server[Any]) -> None:
        """Serve ``tasks/*`` on ``server`` and advertise the extension."""
        import mcp_types as types
        from pydantic import Field

        class TaskParams(types.RequestParams):
            task_id: str = Field(alias="taskId")

        class UpdateParams(TaskParams):
            input_responses: dict[str, Any] = Field(alias="inputResponses")

        async def get(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
            return self._find(ctx, params.task_id).detailed()

        async def update(ctx: ServerRequestContext[Any], params: UpdateParams) -> dict[str, Any]:
            self._find(ctx, params.task_id).answer(params.input_responses)
            return {"resultType": "complete"}

        async def cancel(ctx: ServerRequestContext[Any], params: TaskParams) -> dict[str, Any]:
            task = self._find(ctx, params.task_id)
            if task.runner is not None and not task.runner.done():
                task.runner.cancel()
                # Answer once the call has unwound (its Ctrl-C sent), so the next send
                # the client makes meets an idle session.
                with contextlib.suppress(BaseException):
                    await asyncio.wait({task.runner}, timeout=5)
            return {"resultType": "complete"}

        server.add_request_handler("tasks/get", TaskParams, get)
        server.add_request_handler("tasks/update", UpdateParams, update)
        server.add_request_handler("tasks/cancel", TaskParams, cancel)
        server.extensions[TASKS_EXTENSION] = {}

    def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> McpTask:
        import mcp_types as types
        from mcp.shared.exceptions import MCPError

        if not declares_tasks(ctx):
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"this request does not declare the {TASKS_EXTENSION} extension",
                {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
            )
        headers = getattr(ctx.request, "headers", None)
        named = headers.get("mcp-name") if headers is not None else None
        if named is not None and named != task_id:
            # SEP-2243: the routing header must name the task the body names.
            raise MCPError(
                _HEADER_MISMATCH,
                f"HeaderMismatch: the Mcp-Name header {named!r} is not the task {task_id!r}",
            )
        self._prune()
        task = self._tasks.get(task_id)
        if task is None or task.owner != self._owner_of(ctx):
            raise MCPError(types.INVALID_PARAMS, f"no task {task_id!r}")
        return task

    async def aclose(self) -> None:
        """Cancel every running task (shutdown): each send gets its Ctrl-C."""
        runners = [task.runner for task in self._tasks.values() if task.runner is not None]
        for runner in runners:
            runner.cancel()
        if runners:
            await asyncio.wait(runners, timeout=5)


def _elicit_result(value: Any) -> mcp_types.ElicitResult | None:
    """The client's answer to an elicitation, or None when it is not one."""
    import mcp_types as types
    from pydantic import ValidationError

    try:
        return types.ElicitResult.model_validate(value)
    except ValidationError:
        return None
