"""Clients nobody here wrote, on either protocol era and either transport, for the MCP tests.

``connect(framework, transport, era, ...)`` yields a :class:`Driver` over the real CLI
server: ``sdk`` is the MCP SDK's own high-level :class:`mcp.Client` (the 2026-07-28
revision only: its 2025-11-25 use is what the other MCP tests drive), ``fastmcp`` is
FastMCP's ``Client`` on either era. Over stdio the client starts the server; over HTTP
it connects to ``server`` (see ``test_mcp_http.http_server``) with ``token``.

The revision is asked for as each framework asks: ``mode="2026-07-28"`` adopts it
without a probe, ``"auto"`` probes ``server/discover`` first (what both frameworks do by
default), ``"legacy"`` runs the 2025-11-25 handshake.

``fastmcp_transport`` and ``fastmcp_elicitation`` are the FastMCP pieces on their own,
for clients built on FastMCP's (pydantic-ai's ``MCPToolset`` takes both).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types

SERVER_ARGS = ["-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
MODERN = "2026-07-28"
LEGACY = "2025-11-25"

Person = Callable[[types.ElicitRequestURLParams], Awaitable[types.ElicitResult]]
LogSink = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]

# (framework, transport, era) as the tests run them.
COMBINATIONS = [
    ("sdk", "stdio", MODERN),
    ("sdk", "http", MODERN),
    ("fastmcp", "stdio", MODERN),
    ("fastmcp", "http", MODERN),
    ("fastmcp", "stdio", LEGACY),
    ("fastmcp", "http", LEGACY),
]
IDS = [f"{framework}-{transport}-{era}" for framework, transport, era in COMBINATIONS]


class Driver:
    """One connected client: ``call`` returns the SDK's or FastMCP's tool result."""

    def __init__(self, client: Any, framework: str) -> None:
        self.client = client
        self.framework = framework

    @property
    def session(self) -> Any:
        """The SDK ``ClientSession`` underneath (both frameworks have one)."""
        return self.client.session

    @property
    def protocol_version(self) -> str | None:
        version: str | None = self.session.protocol_version
        return version

    async def call(self, name: str, args: dict[str, Any], timeout: float | None = None) -> Any:
        if self.framework == "sdk":
            return await self.client.call_tool(name, args, read_timeout_seconds=timeout)
        return await self.client.call_tool(name, args, timeout=timeout, raise_on_error=False)


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent), block
    return block.text


def value_of(result: Any) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    value: dict[str, Any] = result.structured_content
    assert value is not None
    return value


def _environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "DSH_MCP_TOKENS"}


@contextlib.asynccontextmanager
async def connect(
    framework: str,
    transport: str,
    era: str,
    workspace: Path,
    *,
    url: str | None = None,
    token: str | None = None,
    person: Person | None = None,
    logs: LogSink | None = None,
    on_http_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
    mode: str | None = None,
) -> AsyncIterator[Driver]:
    """A connected :class:`Driver`; ``mode`` overrides how the era is asked for."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    if framework == "sdk":
        assert era == MODERN, "the SDK's 2025-11-25 client is driven by the other MCP tests"
        async with _sdk(transport, workspace, url, headers, person, logs, mode or MODERN) as c:
            yield Driver(c, "sdk")
    else:
        wanted = mode or (MODERN if era == MODERN else "legacy")
        async with _fastmcp(
            transport, workspace, url, headers, person, logs, wanted, on_http_response
        ) as c:
            yield Driver(c, "fastmcp")


@contextlib.asynccontextmanager
async def _sdk(
    transport: str,
    workspace: Path,
    url: str | None,
    headers: dict[str, str] | None,
    person: Person | None,
    logs: LogSink | None,
    mode: str,
) -> AsyncIterator[Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        assert person is not None
        return await person(params)

    options: dict[str, Any] = {
        "mode": mode,
        "elicitation_callback": elicit if person is not None else None,
        "logging_callback": logs,
        "log_level": "info" if logs is not None else None,
    }
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=[*SERVER_ARGS, "--workspace", str(workspace)],
            cwd=workspace,
            env=_environ(),
        )
        with (workspace / "server.log").open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog), **options) as client:
                yield client
        return
    assert url is not None
    async with (
        create_mcp_http_client(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), **options) as client,
    ):
        yield client


def fastmcp_elicitation(person: Person) -> Callable[..., Awaitable[types.ElicitResult]]:
    """``person`` as a FastMCP elicitation handler (what pydantic-ai's toolset forwards too)."""

    async def elicit(_message: str, _type: Any, params: Any, _ctx: Any) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams), params
        return await person(params)

    return elicit


def fastmcp_transport(
    transport: str,
    workspace: Path,
    *,
    url: str | None = None,
    headers: dict[str, str] | None = None,
    on_http_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
) -> Any:
    """A FastMCP transport: over stdio it starts the server (log in ``server.log``)."""
    from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

    if transport == "stdio":
        return StdioTransport(
            sys.executable,
            [*SERVER_ARGS, "--workspace", str(workspace)],
            env=_environ(),
            cwd=str(workspace),
            keep_alive=False,
            log_file=workspace / "server.log",
        )
    assert url is not None

    def factory(**kwargs: Any) -> httpx2.AsyncClient:
        kwargs.setdefault("timeout", httpx2.Timeout(30.0, read=300.0))
        client = httpx2.AsyncClient(**kwargs)
        if on_http_response is not None:
            client.event_hooks["response"].append(on_http_response)
        return client

    return StreamableHttpTransport(url, headers=headers, httpx_client_factory=factory)


@contextlib.asynccontextmanager
async def _fastmcp(
    transport: str,
    workspace: Path,
    url: str | None,
    headers: dict[str, str] | None,
    person: Person | None,
    logs: LogSink | None,
    mode: str,
    on_http_response: Callable[[httpx2.Response], Awaitable[None]] | None,
) -> AsyncIterator[Any]:
    from fastmcp import Client

    async def log(message: Any) -> None:
        assert logs is not None
        await logs(message)

    target = fastmcp_transport(
        transport, workspace, url=url, headers=headers, on_http_response=on_http_response
    )
    async with Client(
        target,
        mode=mode,
        elicitation_handler=fastmcp_elicitation(person) if person is not None else None,
        log_handler=log if logs is not None else None,
    ) as client:
        yield client
