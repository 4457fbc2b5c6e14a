"""``dsh-terminal mcp``: every registered tool, served over the Model Context Protocol on stdio.

One process serves one client connection, so it runs one harness and one agent. Each
tool the harness lists (``h.tool_schemas()``) is offered with its JSON schema and
description passed through verbatim (the SDK's low-level server, so nothing is re-derived
from Python signatures). A call returns the tool's bounded model-facing text as MCP text
content and its JSON value as structured content; a failed call is an MCP tool error
whose text is ``error [CODE]: message``.

Lifetime. The connection ends when the client closes our stdin, when stdout breaks, or on
SIGTERM, SIGINT or SIGHUP. Each way ends the same: in-flight calls are cancelled, the
agent is disposed (every session it opened is torn down, whole process tree), the
harness is closed, and :func:`serve` returns 0. The signals need handlers of their own:
the provider's host-exit backstop is an ``atexit`` hook, which runs when the interpreter
exits but not when a signal's default action kills the process. A second signal during
shutdown SIGKILLs every live session at once (that same backstop, called directly) and
exits 1, for an operator who cannot wait.

If the server itself is SIGKILLed nothing here runs, and the kernel is the backstop. Each
shell leads its own session on its own PTY, whose master only this process holds; when
the process dies the master closes and the terminal hangs up. Unconfined, bash gets
SIGHUP and, being interactive, hangs up its jobs, foreground and background, before it
exits. Confined, bubblewrap leads the session and its ``--die-with-parent`` SIGKILLs it
and bash; the kernel then hangs up the terminal's foreground job, but bash had no chance
to hang up its background jobs (``cmd &``), which survive. Programs that ignore SIGHUP
(``nohup``) or leave the session (``setsid``) survive either way.

The protocol owns stdout. While serving, fd 1 points at stderr and fd 0 at ``/dev/null``,
so a stray ``print`` or a child that inherits them cannot corrupt or steal the stream;
logs go to stderr. The wire is read and written on private duplicates, on the event loop
when they are pipes or sockets and by daemon threads otherwise (:mod:`.stdio`), so a
shutdown never waits for a client that neither writes nor reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from ..kernel.agents import Agent, Notice
from ..kernel.configfile import (
    ENV_SANDBOX_MODE,
    ENV_WORKSPACE_ROOT,
    ConfigFileError,
    build_config,
)
from ..kernel.errors import DisposeError, DshError, ToolNotFound
from ..kernel.harness import Harness
from ..kernel.humanask import HumanAnswer, HumanAsk
from ..kernel.secret import Secret, SecretAsk
from ..kernel.tools import render_error
from ..provider import hostexit
from ..sandbox.bwrap import SandboxHealth
from .asks import AskRound, PendingAsks, request_state_boundary
from .human_ask import ask_human_by_url, no_human_asks
from .profiles import offered_tools, profile_of, with_profile
from .secret_page import PAGE_VALID_S, SecretPages, ask_by_url
from .stdio import StdioWire
from .tasks import McpTask, Tasks, declares_tasks
from .wake import Listens, attach, install

if TYPE_CHECKING:
    import mcp_types
    from mcp.server import ServerRequestContext
    from mcp.server.lowlevel import Server

__all__ = [
    "ENV_SANDBOX_MODE",
    "ENV_WORKSPACE_ROOT",
    "McpServerError",
    "build_config",
    "sandbox_warning",
    "serve",
    "to_call_result",
]


SERVER_NAME = "dsh-terminal"
AGENT_ID = "mcp-client"

_INSTALL_HINT = (
    "the MCP SDK (an optional extra) is not installed; install it with: "
    "pip install 'dsh-terminal-core[mcp]'"
)
# Bounds on the parts of shutdown that depend on the client or on plugins rather than on
# our own teardown (which has its own TERM->KILL grace).
_CANCEL_WAIT_S = 5.0
_SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

log = logging.getLogger(__name__)


#: The server could not start: a bad config file, flag or environment value.
McpServerError = ConfigFileError


def sandbox_warning(harness: Harness, agent: Agent) -> str | None:
    """Say why ``terminal_open`` will fail for ``agent``, or return ``None`` when it can work.

    The harness opens shells lazily, so an unusable sandbox is not a startup error: the
    server still serves ``pty_*`` and job tools and every call explains itself. But the
    operator who starts the server should hear about it once, up front, with the fix.
    """
    ctx = harness.ctx
    if not ctx.has("sandbox_policy"):
        return None
    policy = ctx.sandbox_policy.resolve(agent)
    if not policy.confined:
        return None
    reason: str | None
    remedy = "install bubblewrap (e.g. apt-get install bubblewrap)"
    if not ctx.has("sandbox"):
        reason = "no sandbox plugin is loaded"
    else:
        sandbox = ctx.sandbox
        if not isinstance(sandbox, SandboxHealth) or sandbox.available():
            return None
        reason = sandbox.unavailable_reason or "it is not usable here"
        remedy = sandbox.remedy or remedy
    return (
        f"sandbox mode '{policy.mode.value}' confines shells with bubblewrap, but {reason}; "
        f"terminal_open will fail until you {remedy}, or start the server with "
        f"--sandbox danger-full-access (or {ENV_SANDBOX_MODE}=danger-full-access)"
    )


# -- entry point -----------------------------------------------------------------------


def serve(
    config_path: str | None,
    sandbox: str | None,
    workspace: str | None,
    tools: str | None = None,
) -> int:
    """Serve every registered tool to one MCP client on stdin/stdout; return the exit code.

    Returns 0 after a clean end (client disconnect or a shutdown signal), 1 when the
    server failed or could not close every session, and 2 when it could not start (the
    ``mcp`` extra is missing, or the config, flags or environment are invalid).
    ``tools`` is the tool profile (``--tools``; SPEC §30.1): ``dsh``, ``codex`` or
    ``claude``.
    """
    try:
        import mcp.server.lowlevel  # noqa: F401
    except ImportError:
        print(f"dsh-terminal mcp: {_INSTALL_HINT}", file=sys.stderr)
        return 2
    _configure_logging()
    try:
        config = with_profile(build_config(config_path, sandbox, workspace), tools)
    except McpServerError as exc:
        log.error("%s", exc.message)
        return 2
    try:
        return asyncio.run(_serve(config))
    except DshError as exc:
        log.error("cannot start: error [%s]: %s", exc.code, exc.message)
        return 2


def _configure_logging() -> None:
    """Send logs to stderr, unless the host already configured logging."""
    ours = logging.getLogger("dsh_terminal_core")  # every logger of the package
    if ours.level == logging.NOTSET:
        ours.setLevel(logging.INFO)
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dsh-terminal mcp: %(levelname)s: %(message)s"))
    root.addHandler(handler)


async def _serve(config: Mapping[str, Mapping[str, Any]]) -> int:
    stop = _Stop()
    async with Harness(config=config) as harness:
        agent = harness.create_agent(AGENT_ID)
        profile = profile_of(config)
        _announce(harness, agent, profile)
        pages = secret_pages(harness)
        listens = Listens()
        tasks = Tasks(pages, lambda _ctx: agent.id)
        server = _build_server(
            harness, lambda _ctx: agent, pages, listens, profile=profile, tasks=tasks
        )
        status = 0
        failed = False
        with stop.installed(asyncio.get_running_loop()):
            try:
                async with StdioWire() as wire:
                    wire.on_broken = lambda: stop.request("the client stopped reading stdout")
                    await _run_until_stopped(server, wire, stop)
            except Exception:
                log.exception("the MCP connection failed")
                status = 1
            log.info("%s; closing every session", stop.reason or "the client disconnected")
            # The agent before the harness, so its sessions close before the services they
            # run on; the harness still closes when that fails, and both failures are reported.
            # Tasks first: each running call gets its Ctrl-C before its session closes.
            for close in (tasks.aclose, pages.aclose, agent.dispose, harness.aclose):
                try:
                    await close()
                except Exception as exc:  # reported, and the exit status says so
                    log.error("shutdown left failures: %s", _describe(exc))
                    failed = True
    if failed:
        return 1
    log.info("all sessions closed; exiting")
    return status


def _announce(harness: Harness, agent: Agent, profile: str) -> None:
    tools = [schema["name"] for schema in offered_schemas(harness, profile)]
    where = ""
    if harness.ctx.has("sandbox_policy"):
        policy = harness.ctx.sandbox_policy.resolve(agent)
        where = f"; sandbox mode {policy.mode.value}, workspace {policy.workspace_root}"
    log.info("serving %d tools on stdio (%s)%s", len(tools), ", ".join(tools), where)
    warning = sandbox_warning(harness, agent)
    if warning is not None:
        log.warning("%s", warning)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, DisposeError) and exc.errors:
        return "; ".join(_describe(part) for part in exc.errors)
    return f"{type(exc).__name__}: {exc}"


# -- the MCP surface -------------------------------------------------------------------


AgentOf = Callable[["ServerRequestContext[Any]"], Agent]
"""Which agent a request acts as: the connection's own on stdio, the caller's identity on HTTP."""

IdentityOf = Callable[["ServerRequestContext[Any]"], str | None]
"""The authenticated identity a request carries (HTTP with tokens), or None."""


def secret_pages(harness: Harness) -> SecretPages:
    """The one-time secret pages of a server, valid as long as the secrets plugin says."""
    valid_s = PAGE_VALID_S
    if harness.ctx.has("secrets"):
        valid_s = harness.ctx.secrets.page_valid_ms / 1000
    return SecretPages(valid_s)


def offered_schemas(harness: Harness, profile: str) -> list[dict[str, Any]]:
    """The schemas of the tools this server offers under its tool profile (SPEC §30.1)."""
    offered = offered_tools(harness, profile)
    return [schema for schema in harness.tool_schemas() if offered(schema["name"])]


def _build_server(
    harness: Harness,
    agent_of: AgentOf,
    pages: SecretPages,
    listens: Listens,
    identity_of: IdentityOf = lambda _ctx: None,
    profile: str = "dsh",
    tasks: Tasks | None = None,
) -> Server[Any]:
    """Build the low-level SDK server whose two handlers forward to ``harness``.

    Every call runs as ``agent_of(ctx)``, resolved per request, so one server can carry
    one agent (stdio) or many identities (HTTP) with the same handlers. Each connected
    client is woken with its agent's notices (:mod:`.mcp_wake`) and may set a log
    level. A tool that asks the person for a secret does so through ``pages`` and the
    request's client: URL-mode elicitation sent as a request on 2025-11-25
    (:mod:`.mcp_secrets`), returned as ``input_required`` on 2026-07-28 (:mod:`.mcp_asks`,
    with a sealed ``requestState`` bound to the caller's identity). ``identity_of``
    names the authenticated identity of a request, for the audit log (HTTP with tokens).
    ``profile`` (``--tools``) limits the tools offered and callable to a tool profile's.
    ``tasks`` runs the calls of clients of the MCP tasks extension (:mod:`.tasks`); the
    caller closes it at shutdown (one is made here when not given).
    """
    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    asks = PendingAsks(pages)
    if tasks is None:
        tasks = Tasks(pages, lambda ctx: agent_of(ctx).id)
    offered = offered_tools(harness, profile)

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=schema["name"],
                    description=schema["description"],
                    input_schema=dict(schema["parameters"]),
                    output_schema=schema.get("outputSchema"),
                )
                for schema in harness.tool_schemas()
                if offered(schema["name"])
            ]
        )

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult | dict[str, Any]:
        # Cancellation by the client arrives as task cancellation, which the tools
        # already honour (a send in flight is interrupted and its reservation released):
        # a notifications/cancelled on either revision over stdio and on 2025-11-25 over
        # HTTP, the response stream closing on 2026-07-28 over HTTP (see mcp_http).
        agent = agent_of(ctx)
        identity = identity_of(ctx)
        # Normally a no-op (the handshake subscribed the connection); over HTTP it moves
        # a connection whose identity was reaped and made anew onto the new agent.
        attach(ctx, agent)
        args = dict(params.arguments or {})
        if not offered(params.name):
            # Under a tool profile the other tools are not offered, so not callable either.
            error = ToolNotFound(f"no tool named {params.name!r} under this tool profile")
            return to_call_result(render_error(error), None, True, _notices(agent))
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:

            async def ask_secret(ask: SecretAsk) -> Secret:
                return await ask_by_url(ctx, pages, ask)

            async def ask_human(ask: HumanAsk) -> HumanAnswer:
                return await ask_human_by_url(ctx, ask)

            result = await harness.call_tool(
                agent,
                params.name,
                args,
                ask_secret=ask_secret,
                ask_human=ask_human,
                identity=identity,
            )
        elif declares_tasks(ctx):
            # A client of the tasks extension: a long call or a person's ask is a task.
            async def run_as_task(task: McpTask) -> types.CallToolResult:
                result = await harness.call_tool(
                    agent,
                    params.name,
                    args,
                    ask_secret=tasks.ask_secret(task),
                    ask_human=tasks.ask_human(task),
                    identity=identity,
                )
                return to_call_result(result.text, result.value, result.is_error, _notices(agent))

            return await tasks.call(ctx, run_as_task)
        else:
            round_ = AskRound(ctx, asks, agent, params)
            try:
                result = await harness.call_tool(
                    agent,
                    params.name,
                    args,
                    ask_secret=round_.ask,
                    ask_human=no_human_asks,
                    identity=identity,
                )
            finally:
                round_.finish()
            if round_.input_required is not None:
                return round_.input_required
        return to_call_result(result.text, result.value, result.is_error, _notices(agent))

    server: Server[Any] = Server(
        SERVER_NAME,
        version=_version(),
        instructions=harness.system_prompt() or None,
        on_list_tools=list_tools,
        # The SDK sends whatever model or dict a handler returns; a CreateTaskResult (the
        # tasks extension) has no SDK model, so it travels as a dict the signature omits.
        on_call_tool=cast(Any, call_tool),
    )
    if not _tracing_configured():
        # The SDK wraps every message in an OpenTelemetry span. With no tracer provider
        # the spans record nothing, yet cost a tenth of the SDK's time per call.
        from mcp.server._otel import OpenTelemetryMiddleware

        server.middleware[:] = [
            layer for layer in server.middleware if not isinstance(layer, OpenTelemetryMiddleware)
        ]
    install(server, agent_of, listens)
    tasks.install(server)
    tasks.announce = listens.tell_task
    server.middleware.append(
        request_state_boundary(pages.valid_s, lambda ctx: agent_of(ctx).id, SERVER_NAME)
    )
    return server


def _tracing_configured() -> bool:
    """Whether OpenTelemetry has a tracer provider (set in code or by environment)."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def to_call_result(
    text: str, value: object, is_error: bool, notices: list[Notice] | None = None
) -> mcp_types.CallToolResult:
    """Map one tool result onto MCP: text content, structured content, the error flag.

    Structured content must be a JSON object in MCP, so other values (lists, strings)
    travel only as text. Notices queued for the agent since its previous call (a
    background job finished) follow as a second text block of ``[notice]`` lines, which
    leaves the tool's own text exactly as the tool bounded it; and, for a result with
    structured content, as its ``notices`` list too (every output schema declares it),
    because some clients (pydantic-ai) hand their model only the structured content
    when every block is text. An error has no structured content: its notices reach the
    model in the text.
    """
    import mcp_types as types

    content: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    structured = value if isinstance(value, dict) else None
    if notices:
        lines = "\n".join(f"[notice] {notice.text}" for notice in notices)
        content.append(types.TextContent(type="text", text=lines))
        if structured is not None:
            structured = {**structured, "notices": [notice.to_wire() for notice in notices]}
    return types.CallToolResult(content=content, structured_content=structured, is_error=is_error)


def _notices(agent: Agent) -> list[Notice]:
    return agent.drain_notices()


def _version() -> str:
    try:
        return importlib.metadata.version("dsh-terminal-core")
    except importlib.metadata.PackageNotFoundError:
        return "0"


# -- lifetime --------------------------------------------------------------------------


class _Stop:
    """Why the connection should end, set once by a signal or by the wire."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.reason: str | None = None

    def request(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.event.set()

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if not self.event.is_set():
            self.request(f"received {name}")
            return
        # The operator asked twice: do not wait for graceful teardown any longer.
        log.warning("received %s during shutdown; killing every session now", name)
        hostexit.kill_all_sync()
        sys.stderr.flush()
        os._exit(1)

    @contextlib.contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop) -> Iterator[_Stop]:
        installed: list[signal.Signals] = []
        try:
            for signum in _SHUTDOWN_SIGNALS:
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(signum, self._on_signal, signum)
                    installed.append(signum)
            yield self
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)


async def _run_until_stopped(server: Server[Any], wire: StdioWire, stop: _Stop) -> None:
    """Serve until the client disconnects or a stop is requested; cancel what is in flight."""
    options = server.create_initialization_options()
    serving = asyncio.create_task(server.run(wire.receive, wire.send, options))
    stopping = asyncio.create_task(stop.event.wait())
    try:
        await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        cancelled = not serving.done()
        if cancelled:
            serving.cancel()
            # Tools unwind promptly on cancellation; the bound only guards against a
            # plugin that does not, so shutdown proceeds to dispose its sessions anyway.
            await asyncio.wait({serving}, timeout=_CANCEL_WAIT_S)
    if not serving.done():
        log.warning("in-flight calls did not stop within %.0f s", _CANCEL_WAIT_S)
    elif not serving.cancelled() and (exc := serving.exception()) is not None:
        if cancelled and _only_closed_streams(exc):
            # The SDK's relay was handing a frame on when we cancelled it, and met the
            # stream its dispatcher had just closed: shutdown in progress, not a failure.
            log.debug("serving ended on a closed stream while stopping: %r", exc)
            return
        raise exc


def _only_closed_streams(exc: BaseException) -> bool:
    import anyio

    if isinstance(exc, BaseExceptionGroup):
        return all(_only_closed_streams(part) for part in exc.exceptions)
    return isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError)
