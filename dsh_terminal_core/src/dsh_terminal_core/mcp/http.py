"""``dsh-terminal mcp --http HOST:PORT``: the same tools over the SDK's streamable-HTTP transport.

One server process serves many clients at ``/mcp``. Each request must carry
``Authorization: Bearer <token>``; the token names an agent identity (see
:mod:`.mcp_tokens`) and a missing or unknown token is answered 401 before the request
reaches the protocol, so no tool runs. Only on a loopback address, and only when asked
with ``--no-auth``, does the server take requests without a token, all as one identity,
and then it also checks ``Host`` and ``Origin`` so a web page cannot reach it through DNS
rebinding.

Sessions belong to the identity, not to the connection (:mod:`.mcp_identities`): a
client that reconnects with the same token finds its terminals alive and reads what it
missed with ``terminal_read`` by absolute line. Every MCP session of an identity is
woken with its agent's notices, and no other identity's (:mod:`.mcp_wake`; a session
moves to the new agent of a reaped identity at its next call). An identity with no open
connection for ``idle_ttl_s`` is reaped. SIGTERM, SIGINT or SIGHUP stop accepting, dispose every
identity (sends in flight settle, process trees are torn down), close the harness and
return 0; a second signal kills every session at once and exits 1, as on stdio.

Watch links (SPEC §22) are served under ``/watch/<token>`` on the same address, without a
bearer token: the link is its own capability (:mod:`dsh_terminal_core.human`).

``GET /healthz`` answers 200 without a token, for a liveness probe; it says nothing
about the server beyond that it answers.

Both protocol revisions share ``/mcp``; the SDK routes each request by its
``MCP-Protocol-Version`` header. A 2026-07-28 request is one POST whose client cancels
it by closing the connection, so that request is cancelled here when its client goes
away (a Ctrl-C for a send in flight), as 2025-11-25's ``notifications/cancelled`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
import logging
import socket
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from ..human import HumanService
from ..human.service import WATCH_PREFIX
from ..kernel.agents import Agent
from ..kernel.errors import DisposeError, DshError
from ..kernel.harness import Harness
from .identities import Identities, Lease
from .profiles import profile_of, with_profile
from .server import (
    _INSTALL_HINT,
    McpServerError,
    _build_server,
    _configure_logging,
    _describe,
    _Stop,
    build_config,
    offered_schemas,
    sandbox_warning,
    secret_pages,
)
from .tasks import Tasks
from .tokens import ENV_TOKENS, TokenTable, bearer_token, load_tokens
from .wake import Listens

if TYPE_CHECKING:
    import uvicorn
    from mcp.server import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.types import Message, Receive, Scope, Send

__all__ = [
    "DEFAULT_IDLE_TTL_S",
    "MCP_PATH",
    "BindAddress",
    "HttpOptions",
    "is_loopback",
    "parse_bind",
    "resolve_http_options",
    "serve_http",
]

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
DEFAULT_IDLE_TTL_S = 3600.0
NO_AUTH_AGENT_ID = "mcp-client"
# How long shutdown lets open HTTP responses finish once every identity is disposed.
_GRACEFUL_S = 3.0
_LEASE_KEY = "dsh.lease"
_UNAUTHORIZED = b'{"error":"invalid_token","error_description":"a valid bearer token is required"}'
_CHALLENGE = (b"www-authenticate", b'Bearer realm="dsh-terminal", error="invalid_token"')

log = logging.getLogger("dsh_terminal_core.mcp_server")


# -- options ---------------------------------------------------------------------------


@attrs.frozen
class BindAddress:
    """Where to listen: ``host`` as given (brackets stripped), ``port`` (0 picks one)."""

    host: str
    port: int

    def url(self, port: int | None = None) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}{MCP_PATH}"


def parse_bind(text: str) -> BindAddress:
    """Parse ``HOST:PORT`` (``[::1]:PORT`` for IPv6).

    Raises:
        McpServerError: no port, a port outside 0-65535, or an empty host.
    """
    host, sep, port_text = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise McpServerError(f"--http {text!r}: write an IPv6 address in brackets, e.g. [::1]:8080")
    if not sep or not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise McpServerError(
            f"--http {text!r} is not HOST:PORT with a port in 0-65535 (e.g. 127.0.0.1:8080)"
        )
    return BindAddress(host, int(port_text))


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(str(address).split("%", 1)[0]).is_loopback for address in addresses
    )


@attrs.frozen
class HttpOptions:
    """A validated HTTP setup: ``tokens`` is ``None`` only for ``--no-auth`` on loopback."""

    bind: BindAddress
    tokens: TokenTable | None
    idle_ttl_s: float


def resolve_http_options(
    address: str,
    token_file: str | None,
    no_auth: bool,
    idle_ttl_s: float,
    environ: Mapping[str, str] | None = None,
) -> HttpOptions:
    """Check the address, the tokens and the idle TTL together; refuse what is unsafe.

    Raises:
        McpServerError: a bad address or TTL; ``--no-auth`` off loopback (tokens or
            not); ``--no-auth`` together with tokens; no tokens without ``--no-auth``.
        TokenError: the token file or ``DSH_MCP_TOKENS`` is unreadable or malformed.
    """
    bind = parse_bind(address)
    if not idle_ttl_s > 0 or idle_ttl_s != idle_ttl_s or idle_ttl_s == float("inf"):
        raise McpServerError(f"--idle-ttl-s {idle_ttl_s!r} must be a positive number of seconds")
    if no_auth:
        if not is_loopback(bind.host):
            raise McpServerError(
                f"--no-auth is only allowed on a loopback address, not {bind.host!r}: "
                f"anyone who can reach it could run commands; give tokens with "
                f"--token-file FILE or {ENV_TOKENS} instead"
            )
        if token_file is not None:
            raise McpServerError("--no-auth and --token-file contradict each other; pick one")
        return HttpOptions(bind, None, idle_ttl_s)
    tokens = load_tokens(token_file, environ)
    if tokens is None:
        raise McpServerError(
            f"refusing to serve {bind.url()} without authentication: give --token-file FILE "
            f"or {ENV_TOKENS} (a JSON object of token -> agent id), or, on a loopback "
            "address only, --no-auth"
        )
    return HttpOptions(bind, tokens, idle_ttl_s)


# -- entry point -----------------------------------------------------------------------


def serve_http(
    config_path: str | None,
    sandbox: str | None,
    workspace: str | None,
    *,
    address: str,
    token_file: str | None = None,
    no_auth: bool = False,
    idle_ttl_s: float = DEFAULT_IDLE_TTL_S,
    tools: str | None = None,
) -> int:
    """Serve every registered tool over streamable HTTP until a signal; return the exit code.

    ``tools`` is the tool profile (``--tools``; SPEC §30.1): ``dsh``, ``codex`` or
    ``claude``.

    Returns 0 after a clean shutdown, 1 when serving failed or some session could not
    be closed, 2 when the server could not start (the ``mcp`` extra is missing, the
    options are invalid or unsafe, or the address cannot be bound).
    """
    try:
        import mcp.server.streamable_http_manager  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print(f"dsh-terminal: {_INSTALL_HINT}", file=sys.stderr)
        return 2
    _configure_logging()
    try:
        config = with_profile(build_config(config_path, sandbox, workspace), tools)
        options = resolve_http_options(address, token_file, no_auth, idle_ttl_s)
        listener = _bind(options.bind)
    except DshError as exc:
        log.error("%s", exc.message)
        return 2
    try:
        return asyncio.run(_serve(config, options, listener))
    except DshError as exc:
        log.error("cannot start: error [%s]: %s", exc.code, exc.message)
        return 2
    finally:
        listener.close()


def _bind(bind: BindAddress) -> socket.socket:
    """Bind and listen now, so a taken port is a clean startup error and port 0 is known."""
    try:
        infos = socket.getaddrinfo(
            bind.host, bind.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, sockaddr = infos[0]
        # Name the protocol: asyncio turns Nagle off (TCP_NODELAY) only for sockets whose
        # proto says TCP, and with Nagle on every response written in two parts waits
        # ~40 ms for the client's delayed ACK.
        listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(sockaddr)
            listener.listen(128)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
    except OSError as exc:
        raise McpServerError(f"cannot listen on {bind.url()}: {exc.strerror or exc}") from None
    return listener


async def _serve(
    config: Mapping[str, Mapping[str, Any]], options: HttpOptions, listener: socket.socket
) -> int:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    stop = _Stop()
    async with Harness(config=config) as harness:
        identities = Identities(harness.create_agent, options.idle_ttl_s)
        profile = profile_of(config)
        _announce(harness, options, profile)
        pages = secret_pages(harness)
        listens = Listens()
        identity_of = _identity_of if options.tokens is not None else (lambda _ctx: None)
        tasks = Tasks(pages, lambda ctx: _agent_of(ctx).id)
        server = _build_server(
            harness, _agent_of, pages, listens, identity_of, profile=profile, tasks=tasks
        )
        # A call's answer is one JSON body rather than a one-event SSE stream: the tools
        # send nothing mid-call, and the plain body costs about half the CPU per call.
        manager = StreamableHTTPSessionManager(
            server, security_settings=_security_settings(options), json_response=True
        )
        port = int(listener.getsockname()[1])
        human = harness.ctx.human if harness.ctx.has("human") else None
        if human is not None:  # watch links on this server's own address (SPEC §22)
            human.serve_at(public_base(options.bind, port))
            await _overview_links(human, identities, options)
        gateway = _Gateway(manager, options.tokens, identities, stop, human)
        http = _http_server(gateway, on_started=lambda: _listening(options, port))
        status = 0
        failed = False
        with stop.installed(asyncio.get_running_loop()):
            try:
                async with manager.run():
                    serving = asyncio.create_task(http.serve(sockets=[listener]))
                    stopping = asyncio.create_task(stop.event.wait())
                    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    stopping.cancel()
                    http.should_exit = True  # stop accepting; open responses may finish
                    listens.close()  # 2026-07-28 listen streams end with their result
                    if serving.done() and not stop.event.is_set():
                        stop.request("the HTTP server stopped")
                    log.info("%s; closing every session", stop.reason)
                    await tasks.aclose()  # each running task's send gets its Ctrl-C
                    await pages.aclose()
                    failed = not await _close(identities)
                # Leaving the manager ended every MCP session, so held streams close too.
                await asyncio.wait({serving}, timeout=_GRACEFUL_S + 2)
                if not serving.done():
                    http.force_exit = True
                    serving.cancel()
                    await asyncio.wait({serving})
                if not serving.cancelled() and (exc := serving.exception()) is not None:
                    raise exc
            except Exception:
                log.exception("the HTTP server failed")
                status = 1
            try:
                await harness.aclose()
            except Exception as exc:  # reported, and the exit status says so
                log.error("shutdown left failures: %s", _describe(exc))
                failed = True
    if failed:
        return 1
    log.info("all sessions closed; exiting")
    return status


async def _close(identities: Identities) -> bool:
    try:
        await identities.close()
    except DisposeError as exc:
        log.error("shutdown left failures: %s", _describe(exc))
        return False
    return True


def _announce(harness: Harness, options: HttpOptions, profile: str) -> None:
    tools = [schema["name"] for schema in offered_schemas(harness, profile)]
    probe = Agent("mcp-http")  # a stand-in: the default policy is every identity's
    where = ""
    if harness.ctx.has("sandbox_policy"):
        policy = harness.ctx.sandbox_policy.resolve(probe)
        where = f"; sandbox mode {policy.mode.value}, workspace {policy.workspace_root}"
    log.info("serving %d tools over HTTP (%s)%s", len(tools), ", ".join(tools), where)
    if options.tokens is None:
        log.warning("authentication is off (--no-auth): every local user can run commands here")
    else:
        for note in options.tokens.warnings:
            log.warning("%s", note)
        log.info(
            "%d identities from %s: %s",
            len(options.tokens.entries),
            options.tokens.source,
            ", ".join(options.tokens.agent_ids),
        )
    warning = sandbox_warning(harness, probe)
    if warning is not None:
        log.warning("%s", warning)


async def _overview_links(
    human: HumanService, identities: Identities, options: HttpOptions
) -> None:
    """One overview link per identity (SPEC §31), for the operator's eyes only: the log."""
    agent_ids = options.tokens.agent_ids if options.tokens is not None else (NO_AUTH_AGENT_ID,)
    for agent_id in agent_ids:
        link = await human.open_overview(
            functools.partial(identities.agent, agent_id), label=agent_id, ttl_s=None
        )
        log.info("overview of identity %r (for the operator, not a model): %s", agent_id, link.url)


def public_base(bind: BindAddress, port: int) -> str:
    """``http://HOST:PORT`` for links to this server: the bound host, or this host's name
    when bound to every address (0.0.0.0, ::)."""
    host = bind.host
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _listening(options: HttpOptions, port: int) -> None:
    log.info(
        "listening on %s (idle identities reaped after %g s)",
        options.bind.url(port),
        options.idle_ttl_s,
    )


def _agent_of(ctx: ServerRequestContext[Any]) -> Agent:
    """The agent of the identity whose request carries this call."""
    scope = getattr(ctx.request, "scope", None)
    lease = scope.get(_LEASE_KEY) if isinstance(scope, dict) else None
    if not isinstance(lease, Lease):
        raise McpServerError("the request carries no authenticated identity")
    return lease.agent


def _identity_of(ctx: ServerRequestContext[Any]) -> str | None:
    """The bearer-token identity this call came as (the agent is that identity's)."""
    return _agent_of(ctx).id


def _security_settings(options: HttpOptions) -> Any:
    """Without tokens (loopback only), pin ``Host`` and ``Origin`` to loopback names."""
    from mcp.server.transport_security import TransportSecuritySettings

    if options.tokens is not None:
        # A token is the guard: a page that rebinds a name to this server has none.
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ("127.0.0.1", "localhost", "[::1]")
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names],
        allowed_origins=[f"http://{name}:*" for name in names],
    )


# -- HTTP ------------------------------------------------------------------------------


class _Gateway:
    """The ASGI app: ``/healthz``, and ``/mcp`` behind the bearer check and an identity lease."""

    def __init__(
        self,
        manager: StreamableHTTPSessionManager,
        tokens: TokenTable | None,
        identities: Identities,
        stop: _Stop,
        human: HumanService | None = None,
    ) -> None:
        self._manager = manager
        self._human = human
        self._tokens = tokens
        self._identities = identities
        self._stop = stop
        # One SDK user per identity, made once: it is immutable and asked for on every request.
        self._users: dict[str, Any] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == HEALTH_PATH and scope["method"] in {"GET", "HEAD"}:
            await _respond(send, 200, b"ok\n")
            return
        if path.startswith(WATCH_PREFIX) and self._human is not None:
            # A watch link is its own capability: no bearer token, never one on the page.
            await self._human.app(scope, receive, send)
            return
        if path != MCP_PATH:
            await _respond(send, 404, b"not found; the MCP endpoint is /mcp\n")
            return
        agent_id = self._authenticate(scope)
        if agent_id is None:
            client = scope.get("client")
            log.warning(
                "refused a request without a valid bearer token from %s",
                f"{client[0]}:{client[1]}" if client else "an unknown peer",
            )
            await _respond(
                send, 401, _UNAUTHORIZED, content_type=b"application/json", extra=[_CHALLENGE]
            )
            return
        try:
            lease = self._identities.lease(agent_id)
        except DshError:
            await _respond(send, 503, b"shutting down\n")
            return
        scope[_LEASE_KEY] = lease
        if self._tokens is not None:
            user = self._users.get(agent_id)
            if user is None:
                user = self._users[agent_id] = _sdk_user(agent_id)
            scope["user"] = user
        try:
            if _is_modern_post(scope):
                await _cancelled_on_disconnect(
                    self._manager.handle_request,
                    self._manager.max_request_body_size,
                    scope,
                    receive,
                    send,
                )
            else:
                await self._manager.handle_request(scope, receive, send)
        finally:
            lease.release()

    def _authenticate(self, scope: Scope) -> str | None:
        if self._tokens is None:
            return NO_AUTH_AGENT_ID
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
                break
        token = bearer_token(authorization)
        return None if token is None else self._tokens.identify(token)


def _is_modern_post(scope: Scope) -> bool:
    """A POST the SDK serves as a 2026-07-28 single exchange (its own routing rule)."""
    from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    if scope["method"] != "POST":
        return False
    wanted = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
    version = next((value for name, value in scope["headers"] if name == wanted), None)
    return version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS


async def _cancelled_on_disconnect(
    app: Any, limit: int, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve one request with ``app``, cancelling it the moment its client goes away.

    On the 2026-07-28 revision a client cancels a call by closing its response stream
    (it sends no ``notifications/cancelled``; one posted anyway is acknowledged and
    dropped). The SDK's JSON-response path awaits the handler without watching the
    connection, so a cancelled ``terminal_send`` would run to its end and keep the
    session busy. Here the body is read first, so that from then on the watch is the
    only reader of ``receive``, and replayed to ``app``; a disconnect cancels ``app``,
    which the tools answer as a Ctrl-C. ``app`` reads a disconnect once the body is
    used up, as it would from the server. A body over ``limit`` is passed on unread
    past that point, for ``app`` to refuse.
    """
    import anyio

    head: list[Message] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return  # gone before the request was whole: nothing to answer
        head.append(message)
        size += len(message.get("body", b""))
        if not message.get("more_body", False) or size > limit:
            break
    gone = anyio.Event()

    async def replay() -> Message:
        if head:
            return head.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            group.cancel_scope.cancel()

        group.start_soon(watch)
        await app(scope, replay, send)
        group.cancel_scope.cancel()


def _sdk_user(agent_id: str) -> Any:
    """The SDK's view of the caller, so it also binds each MCP session to its identity.

    The SDK answers 404 when another credential presents a session's id. The access
    token it keeps holds the agent id, never the secret.
    """
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token=agent_id, client_id=agent_id, scopes=[]))


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    *,
    content_type: bytes = b"text/plain; charset=utf-8",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


def _http_server(app: _Gateway, on_started: Any) -> uvicorn.Server:
    """A uvicorn server that leaves signals to us and reports once it accepts."""
    import uvicorn

    class _Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # Our own handlers stop the server in order; uvicorn's would re-raise the
            # signal after serving and turn a clean shutdown into death by SIGTERM.
            yield

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                on_started()

    config = uvicorn.Config(
        app,
        lifespan="off",
        access_log=False,  # request lines would be noise; auth refusals are logged above
        log_config=None,  # keep the host's logging (ours sends everything to stderr)
        ws="none",
        server_header=False,
        timeout_graceful_shutdown=int(_GRACEFUL_S),
    )
    return _Server(config)
