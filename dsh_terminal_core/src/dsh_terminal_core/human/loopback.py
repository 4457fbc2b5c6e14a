"""A loopback HTTP server for the watch pages when no MCP HTTP server runs.

Like the secret page's server (:mod:`dsh_terminal_core.mcp.secret_page`): 127.0.0.1, a
random port, started on the first link, one request per connection. It runs the same
ASGI app the MCP HTTP server mounts, through the least of ASGI that app uses: one
request body, a disconnect once the client closes, and responses either whole (with a
length) or streamed until the connection closes (the event stream). A request whose
``Host`` is not this address is refused (421), so a page on another site cannot reach
it through DNS rebinding. No dependency beyond asyncio: an in-process host without the
``[mcp]`` extra gets pages too.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["LoopbackServer"]

App = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Awaitable[MutableMapping[str, Any]]],
        Callable[[MutableMapping[str, Any]], Awaitable[None]],
    ],
    Awaitable[None],
]

_MAX_HEAD = 16 * 1024
_MAX_BODY = 64 * 1024
_HEAD_BOUND_S = 30.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
}


class LoopbackServer:
    """Serve ``app`` on 127.0.0.1 at a port picked by the kernel."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._server: asyncio.Server | None = None
        self._port = 0
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, host="127.0.0.1", port=0, limit=_MAX_HEAD
        )
        self._port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(set(self._connections), timeout=5)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._one(reader, writer)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except (TimeoutError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(_HEAD_BOUND_S):
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *lines = head.split("\r\n")
            parts = request_line.split(" ")
            if len(parts) != 3:
                await _plain(writer, 400)
                return
            method, target, _version = parts
            headers: list[tuple[bytes, bytes]] = []
            found: dict[str, str] = {}
            for line in lines:
                name, sep, value = line.partition(":")
                if sep:
                    found[name.strip().lower()] = value.strip()
                    headers.append((name.strip().lower().encode(), value.strip().encode()))
            if found.get("host") != f"127.0.0.1:{self._port}":
                await _plain(writer, 421)
                return
            length = found.get("content-length", "0")
            if not length.isdigit() or int(length) > _MAX_BODY:
                await _plain(writer, 413)
                return
            body = await reader.readexactly(int(length))
        split = urllib.parse.urlsplit(target)
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": urllib.parse.unquote(split.path),
            "raw_path": split.path.encode("latin-1"),
            "query_string": split.query.encode("latin-1"),
            "headers": headers,
            "server": ("127.0.0.1", self._port),
            "client": writer.get_extra_info("peername"),
        }
        delivered = False

        async def receive() -> MutableMapping[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            with contextlib.suppress(Exception):
                while await reader.read(4096):
                    pass
            return {"type": "http.disconnect"}

        started: dict[str, Any] = {}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
                return
            chunk = message.get("body", b"")
            if started:
                status = started["status"]
                head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
                for name, value in started.get("headers", []):
                    head.append(f"{name.decode('latin-1')}: {value.decode('latin-1')}")
                head.append("Connection: close")
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
                started.clear()
            if chunk:
                writer.write(chunk)
            await writer.drain()

        await self._app(scope, receive, send)


async def _plain(writer: asyncio.StreamWriter, status: int) -> None:
    writer.write(
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Length: 0\r\nConnection: close\r\n\r\n".encode("latin-1")
    )
    await writer.drain()
