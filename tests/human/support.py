"""A small HTTP client for the watch pages: whole requests, and an event stream reader."""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import attrs


@attrs.frozen
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def _target(url: str) -> tuple[str, int, str]:
    split = urllib.parse.urlsplit(url)
    assert split.hostname is not None and split.port is not None
    return split.hostname, split.port, split.path or "/"


def _head(method: str, url: str, body: bytes, headers: dict[str, str]) -> bytes:
    host, port, path = _target(url)
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    raw = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status_line, *lines = raw.split("\r\n")
    headers = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(status_line.split(" ")[1]), headers


async def request(
    method: str, url: str, payload: object = None, headers: dict[str, str] | None = None
) -> Answer:
    """One request; a JSON ``payload`` is sent as ``application/json``."""
    host, port, _ = _target(url)
    body = b""
    sent = dict(headers or {})
    if payload is not None:
        body = json.dumps(payload).encode()
        sent.setdefault("Content-Type", "application/json")
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(_head(method, url, body, sent))
        await writer.drain()
        status, answer_headers = await _read_head(reader)
        data = await reader.read()
        return Answer(status, answer_headers, data)
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


class Events:
    """An open ``/events`` stream: ``await next_event()`` gives ``(name, data)``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.status = 0

    async def next_event(self) -> tuple[str, Any]:
        name = "message"
        data: list[str] = []
        while True:
            line = (await self.reader.readline()).decode()
            if not line:
                raise EOFError("the event stream ended")
            line = line.rstrip("\n")
            if line == "":
                if data:
                    return name, json.loads("\n".join(data))
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)

    async def until(self, name: str, check: Any = None, timeout: float = 10.0) -> Any:
        async with asyncio.timeout(timeout):
            while True:
                got, data = await self.next_event()
                if got == name and (check is None or check(data)):
                    return data

    def close(self) -> None:
        self.writer.close()


@contextlib.asynccontextmanager
async def events(url: str, path: str = "events") -> AsyncIterator[Events]:
    """The event stream ``<url>/<path>``: ``events`` (the text view, an overview) or
    ``stream`` (a watch page's terminal bytes)."""
    host, port, _ = _target(f"{url}/{path}")
    reader, writer = await asyncio.open_connection(host, port)
    stream = Events(reader, writer)
    try:
        writer.write(_head("GET", f"{url}/{path}", b"", {}))
        await writer.drain()
        stream.status, _ = await _read_head(reader)
        yield stream
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
