"""The few ways the pages answer: whole bodies, empty statuses, JSON, event-stream frames.

Shared by the watch page (:mod:`.app`) and the operator's pages (:mod:`.operator_app`),
so every answer carries the same security headers: never cached, never framed, never
sniffed, never sending a referrer (a link's token is in its path).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = [
    "SECURITY",
    "Receive",
    "Scope",
    "Send",
    "empty",
    "event",
    "json_answer",
    "nothing",
    "read_body",
    "same_origin",
    "start_events",
    "whole",
]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MAX_BODY = 64 * 1024
SECURITY = [
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
]


def same_origin(headers: dict[bytes, bytes]) -> bool:
    origin = headers.get(b"origin")
    if origin is None:
        return True
    host = headers.get(b"host", b"")
    return origin in (b"http://" + host, b"https://" + host)


async def read_body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def event(send: Send, name: str, data: object) -> None:
    payload = json.dumps(data, ensure_ascii=False)
    frame = f"event: {name}\ndata: {payload}\n\n".encode()
    await send({"type": "http.response.body", "body": frame, "more_body": True})


async def whole(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *SECURITY,
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def empty(send: Send, status: int) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"0"), *SECURITY],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def json_answer(send: Send, status: int, value: object) -> None:
    await whole(send, status, json.dumps(value).encode(), b"application/json")


def nothing() -> None:
    return None


async def start_events(send: Send) -> None:
    """Begin a Server-Sent Events answer; the frames follow with :func:`event`."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), *SECURITY],
        }
    )
