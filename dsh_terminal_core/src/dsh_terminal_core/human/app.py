"""The watch page and its endpoints, as a plain ASGI app under ``/watch/<token>``.

* ``GET /watch/<token>`` — the page (:mod:`.page`);
* ``GET /watch/<token>/events`` — Server-Sent Events: ``state`` (who has control),
  ``screen`` (what the terminal shows, pushed when the session's output changes it,
  never polled), ``end`` (the link expired or the session closed);
* ``POST /watch/<token>/control`` ``{"action": "take" | "hand_back"}`` — control links
  only;
* ``POST /watch/<token>/keys`` ``{"data": "..."}`` — a person's keys, raw, while they
  hold control.

An unknown, expired or closed link, and any other path, is 404 with an empty body: a
guess learns nothing. A read-only link posting is 403 with an empty body. Posts must be
JSON, which a cross-site form cannot send, and an ``Origin`` other than the page's own
is refused. Nothing here ever carries a bearer token or a secret: the page shows what
the terminal shows, and a hidden prompt's answer is never echoed there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from ..kernel.errors import TerminalError
from ..registry import ReadRequest, WatchedSession, status_text
from .page import render_page
from .service import WATCH_PREFIX

if TYPE_CHECKING:
    from .service import HumanService, WatchLink

__all__ = ["LINES_SHOWN", "WatchApp"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

LINES_SHOWN = 200
"""How many of a line session's last lines the page shows."""
_MAX_BODY = 64 * 1024
_VIEW_BYTES = 256 * 1024
_HEARTBEAT_S = 15.0
# The least time between two pushes of the view: output faster than this is coalesced.
_PUSH_GAP_S = 0.02
_SECURITY = [
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
]


class WatchApp:
    """Answers every request under ``/watch/`` for one :class:`HumanService`."""

    def __init__(self, service: HumanService) -> None:
        self._service = service
        self._closing: asyncio.Event | None = None

    def _closing_event(self) -> asyncio.Event:
        if self._closing is None:
            self._closing = asyncio.Event()
        return self._closing

    async def aclose(self) -> None:
        """End every open event stream."""
        self._closing_event().set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if not path.startswith(WATCH_PREFIX):
            await _empty(send, 404)
            return
        token, _, rest = path[len(WATCH_PREFIX) :].partition("/")
        link = self._service.find(token)
        method = scope["method"]
        if link is None:
            await _empty(send, 404)
        elif rest == "" and method in {"GET", "HEAD"}:
            nonce = secrets.token_urlsafe(16)
            body = render_page(link, nonce, self._service.control_state(link)).encode()
            csp = (
                f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; "
                "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
            )
            await _whole(
                send,
                200,
                b"" if method == "HEAD" else body,
                b"text/html; charset=utf-8",
                [(b"content-security-policy", csp.encode())],
            )
        elif rest == "events" and method == "GET":
            await self._events(link, receive, send)
        elif rest in ("control", "keys") and method == "POST":
            await self._post(link, rest, scope, receive, send)
        else:
            await _empty(send, 404)

    # -- posts ----------------------------------------------------------------------------

    async def _post(
        self, link: WatchLink, what: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if not link.control:
            await _empty(send, 403)
            return
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        if not _same_origin(headers):
            await _empty(send, 403)
            return
        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind != b"application/json":
            await _empty(send, 415)
            return
        body = await _body(receive)
        if body is None:
            await _empty(send, 413)
            return
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            await _json(send, 400, {"error": "the body must be a JSON object"})
            return
        try:
            if what == "control":
                action = payload.get("action")
                if action == "take":
                    state = await self._service.take(link)
                elif action == "hand_back":
                    state = await self._service.hand_back(link)
                else:
                    await _json(send, 400, {"error": "action must be 'take' or 'hand_back'"})
                    return
                await _json(send, 200, {"state": state})
                return
            data = payload.get("data")
            if not isinstance(data, str):
                await _json(send, 400, {"error": "data must be a string"})
                return
            await self._service.type_keys(link, data)
            await _json(send, 200, {"typed": len(data)})
        except TerminalError as exc:
            await _json(send, 409, {"error": exc.message, "code": exc.code})

    # -- the event stream -----------------------------------------------------------------

    async def _events(self, link: WatchLink, receive: Receive, send: Send) -> None:
        service = self._service
        try:
            session = service.terminals.get_session(link.owner, link.session_id)
        except TerminalError:
            await _empty(send, 404)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream; charset=utf-8"), *_SECURITY],
            }
        )
        wake = asyncio.Event()
        remove = session.watch(wake.set) if isinstance(session, WatchedSession) else _nothing
        unwatch = service.terminals.watch_control(link.owner, link.session_id, link.changed.set)
        gone = asyncio.Event()

        async def until_gone() -> None:
            with contextlib.suppress(Exception):
                while (await receive())["type"] != "http.disconnect":
                    pass
            gone.set()

        watcher = asyncio.ensure_future(until_gone())
        service.page_opened(link)
        waits: dict[str, asyncio.Future[Any]] = {}
        screen: bool | None = None
        loop = asyncio.get_running_loop()
        pushed = 0.0
        try:
            last_state: str | None = None
            last_view: dict[str, Any] | None = None
            while not gone.is_set():
                wake.clear()
                link.changed.clear()
                state = service.control_state(link)
                if state == "closed" or not link.live:
                    reason = "closed" if state == "closed" else "expired"
                    await _event(send, "end", {"reason": reason})
                    break
                if state != last_state:
                    await _event(send, "state", {"control": state})
                    last_state = state
                view, screen = self._view(link, screen)
                if view != last_view:
                    await _event(send, "screen", view)
                    last_view = view
                    pushed = loop.time()
                for name, event in (
                    ("wake", wake),
                    ("changed", link.changed),
                    ("gone", gone),
                    ("closing", self._closing_event()),
                ):
                    if name not in waits or waits[name].done():
                        waits[name] = asyncio.ensure_future(event.wait())
                done, _ = await asyncio.wait(
                    set(waits.values()), timeout=_HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED
                )
                if self._closing_event().is_set():
                    await _event(send, "end", {"reason": "closed"})
                    break
                if not done:
                    await send(
                        {"type": "http.response.body", "body": b": ping\n\n", "more_body": True}
                    )
                elif (gap := pushed + _PUSH_GAP_S - loop.time()) > 0:
                    await asyncio.sleep(gap)  # a burst of output is pushed as one view
        except (OSError, RuntimeError, asyncio.CancelledError):
            pass  # the page went away mid-write
        finally:
            remove()
            unwatch()
            for waiting in (*waits.values(), watcher):
                waiting.cancel()
            service.page_closed(link)
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _view(self, link: WatchLink, screen: bool | None) -> tuple[dict[str, Any], bool]:
        """What the terminal shows now: a screen session's screen, a line session's tail."""
        terminals = self._service.terminals
        try:
            session = terminals.get_session(link.owner, link.session_id)
        except TerminalError:
            return {"text": "", "status": "closed"}, bool(screen)
        status = status_text(session.status.to_wire())
        if screen is not False:
            try:
                read = terminals.read_screen(link.owner, link.session_id)
            except TerminalError:
                screen = False
            else:
                return {
                    "text": read.screen.text,
                    "cursor": list(read.screen.cursor),
                    "rows": read.rows,
                    "cols": read.cols,
                    "status": status,
                }, True
        total = terminals.read(link.owner, link.session_id, ReadRequest(offset=1, count=1))
        page = terminals.read(
            link.owner,
            link.session_id,
            ReadRequest(
                offset=max(1, total.total_lines - LINES_SHOWN + 1),
                count=LINES_SHOWN,
                max_bytes=_VIEW_BYTES,
            ),
        )
        return {"text": page.text, "lineEnd": page.line_end, "status": status}, False


def _same_origin(headers: dict[bytes, bytes]) -> bool:
    origin = headers.get(b"origin")
    if origin is None:
        return True
    host = headers.get(b"host", b"")
    return origin in (b"http://" + host, b"https://" + host)


async def _body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b""
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _event(send: Send, name: str, data: object) -> None:
    payload = json.dumps(data, ensure_ascii=False)
    frame = f"event: {name}\ndata: {payload}\n\n".encode()
    await send({"type": "http.response.body", "body": frame, "more_body": True})


async def _whole(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        *_SECURITY,
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _empty(send: Send, status: int) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"0"), *_SECURITY],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _json(send: Send, status: int, value: object) -> None:
    await _whole(send, status, json.dumps(value).encode(), b"application/json")


def _nothing() -> None:
    return None
