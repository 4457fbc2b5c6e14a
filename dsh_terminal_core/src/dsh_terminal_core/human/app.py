"""The pages and their endpoints, as a plain ASGI app under ``/watch/<token>``.

A token names a watch link (SPEC §22, §31), or one of the operator's links — a
recording, an identity's overview (:mod:`.operator_app`). For a watch link:

* ``GET /watch/<token>`` — the page (:mod:`.page`): a real terminal (xterm.js) when the
  browser assets are installed and the session's bytes are tapped, else the text view;
* ``GET /watch/<token>/stream`` — Server-Sent Events for the terminal: ``reset`` (the
  retained output, base64, and the window size), then ``out`` (each new piece of
  output), ``size`` (a resize), ``state`` (who has control), ``end``;
* ``GET /watch/<token>/events`` — the text view's events: ``state``, ``screen`` (what
  the terminal shows, pushed when output changes it, never polled), ``end``;
* ``GET /watch/<token>/asset/<name>`` — the browser terminal's script and style;
* ``POST /watch/<token>/control`` ``{"action": "take" | "hand_back"}`` — control links
  only;
* ``POST /watch/<token>/keys`` ``{"data": "..."}`` — a person's keys, as the page's
  terminal encodes them, while they hold control.

An unknown, expired or closed link, and any other path, is 404 with an empty body: a
guess learns nothing. A read-only link posting is 403 with an empty body. Posts must be
JSON, which a cross-site form cannot send, and an ``Origin`` other than the page's own
is refused. Nothing here ever carries a bearer token or a secret: the page shows what
the terminal shows, and a hidden prompt's answer is never echoed there.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..kernel.errors import TerminalError
from ..registry import WatchedSession
from .follow import follow
from .operator import OverviewLink, RecordingLink
from .operator_app import serve_asset, serve_overview, serve_recording
from .page import render_page
from .respond import (
    Receive,
    Scope,
    Send,
    empty,
    event,
    json_answer,
    nothing,
    read_body,
    same_origin,
    start_events,
    whole,
)
from .service import WATCH_PREFIX
from .views import LINES_SHOWN, screen_replay, text_view

if TYPE_CHECKING:
    from ..registry.control import State
    from .service import HumanService, WatchLink

__all__ = ["LINES_SHOWN", "WatchApp", "page_csp"]

# The least time between two pushes of the text view: output faster is coalesced.
_PUSH_GAP_S = 0.02
# A page that falls this far behind the output gets the replay again instead.
_MAX_PENDING = 4 * 1024 * 1024


def page_csp(nonce: str, *, wasm: bool = False) -> bytes:
    """The pages' Content-Security-Policy: only this page's scripts, only its own server."""
    script = f"'nonce-{nonce}'" + (" 'wasm-unsafe-eval'" if wasm else "")
    return (
        f"default-src 'none'; script-src {script}; style-src 'self' 'unsafe-inline'; "
        "font-src 'self' data:; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ).encode()


class WatchApp:
    """Answers every request under ``/watch/`` for one :class:`HumanService`."""

    def __init__(self, service: HumanService) -> None:
        self._service = service
        self._closing: asyncio.Event | None = None

    def closing_event(self) -> asyncio.Event:
        if self._closing is None:
            self._closing = asyncio.Event()
        return self._closing

    async def aclose(self) -> None:
        """End every open event stream."""
        self.closing_event().set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if not path.startswith(WATCH_PREFIX):
            await empty(send, 404)
            return
        token, _, rest = path[len(WATCH_PREFIX) :].partition("/")
        method = scope["method"]
        link = self._service.find(token)
        if link is None:
            other = self._service.operator.find(token)
            if isinstance(other, RecordingLink):
                await serve_recording(self._service, other, rest, scope, send)
            elif isinstance(other, OverviewLink):
                await serve_overview(self, self._service, other, rest, scope, receive, send)
            else:
                await empty(send, 404)
        elif rest == "" and method in {"GET", "HEAD"}:
            await self._page(link, method, send)
        elif rest == "stream" and method == "GET":
            await self._stream(link, receive, send)
        elif rest == "events" and method == "GET":
            await self._events(link, receive, send)
        elif rest.startswith("asset/") and method == "GET":
            await serve_asset(self._service.web_assets(), rest[len("asset/") :], send)
        elif rest in ("control", "keys") and method == "POST":
            await self._post(link, rest, scope, receive, send)
        else:
            await empty(send, 404)

    async def _page(self, link: WatchLink, method: str, send: Send) -> None:
        nonce = secrets.token_urlsafe(16)
        assets = self._service.web_assets()
        tapped = self._service.tap.of(link.session_id) if self._service.tap else None
        if assets is None:
            mode = "text: the browser terminal (xterm.js) is not installed on this server"
        elif tapped is None:
            mode = "text: this session's bytes are not available to the page"
        else:
            mode = "terminal"
        state = self._service.control_state(link)
        body = render_page(link, nonce, state, mode).encode()
        await whole(
            send,
            200,
            b"" if method == "HEAD" else body,
            b"text/html; charset=utf-8",
            [(b"content-security-policy", page_csp(nonce))],
        )

    # -- posts ----------------------------------------------------------------------------

    async def _post(
        self, link: WatchLink, what: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if not link.control:
            await empty(send, 403)
            return
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        if not same_origin(headers):
            await empty(send, 403)
            return
        kind = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if kind != b"application/json":
            await empty(send, 415)
            return
        body = await read_body(receive)
        if body is None:
            await empty(send, 413)
            return
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            await json_answer(send, 400, {"error": "the body must be a JSON object"})
            return
        try:
            if what == "control":
                action = payload.get("action")
                if action == "take":
                    state = await self._service.take(link)
                elif action == "hand_back":
                    state = await self._service.hand_back(link)
                else:
                    await json_answer(send, 400, {"error": "action must be 'take' or 'hand_back'"})
                    return
                await json_answer(send, 200, {"state": state})
                return
            data = payload.get("data")
            if not isinstance(data, str):
                await json_answer(send, 400, {"error": "data must be a string"})
                return
            await self._service.type_keys(link, data)
            await json_answer(send, 200, {"typed": len(data)})
        except TerminalError as exc:
            await json_answer(send, 409, {"error": exc.message, "code": exc.code})

    # -- the terminal's byte stream -------------------------------------------------------

    async def _stream(self, link: WatchLink, receive: Receive, send: Send) -> None:
        service = self._service
        tapped = service.tap.of(link.session_id) if service.tap is not None else None
        if tapped is None or service.control_state(link) == "closed":
            await empty(send, 404)
            return
        await start_events(send)
        wake = asyncio.Event()
        pending = bytearray()

        def on_bytes(chunk: bytes) -> None:
            pending.extend(chunk)
            wake.set()

        # Subscribing and reading the replay in one loop turn: nothing missed or repeated.
        stop = tapped.follow(on_bytes, wake.set)
        shown: dict[str, Any] = {"state": None, "size": None, "first": True}

        async def step() -> bool:
            state = await self._state_or_end(link, send)
            if state is None:
                return False
            size = (tapped.cols, tapped.rows)
            if shown["first"] or len(pending) > _MAX_PENDING:
                replay = tapped.replay()
                if tapped.dropped:  # a late start: a screen session's model draws it now
                    replay = (
                        screen_replay(service, link.owner, link.session_id, tapped.mode_prefix())
                        or replay
                    )
                pending.clear()
                await event(
                    send,
                    "reset",
                    {
                        "data": base64.b64encode(replay).decode("ascii"),
                        "cols": size[0],
                        "rows": size[1],
                        "cut": tapped.dropped > 0,
                    },
                )
                shown["first"], shown["size"] = False, size
            elif size != shown["size"]:
                shown["size"] = size
                await event(send, "size", {"cols": size[0], "rows": size[1]})
            if state != shown["state"]:
                shown["state"] = state
                await event(send, "state", {"control": state})
            while pending:
                chunk = bytes(pending)
                pending.clear()
                await event(send, "out", {"data": base64.b64encode(chunk).decode("ascii")})
            return True  # a shell that exited leaves its last screen on the page

        await self._follow_link(link, receive, send, wake, step, stop)

    # -- the text view's event stream -----------------------------------------------------

    async def _events(self, link: WatchLink, receive: Receive, send: Send) -> None:
        service = self._service
        try:
            session = service.terminals.get_session(link.owner, link.session_id)
        except TerminalError:
            await empty(send, 404)
            return
        await start_events(send)
        wake = asyncio.Event()
        remove = session.watch(wake.set) if isinstance(session, WatchedSession) else nothing
        shown: dict[str, Any] = {"state": None, "view": None, "screen": None}

        async def step() -> bool:
            state = await self._state_or_end(link, send)
            if state is None:
                return False
            if state != shown["state"]:
                await event(send, "state", {"control": state})
                shown["state"] = state
            view, shown["screen"] = text_view(service, link.owner, link.session_id, shown["screen"])
            if view != shown["view"]:
                await event(send, "screen", view)
                shown["view"] = view
            return True

        await self._follow_link(link, receive, send, wake, step, remove, gap_s=_PUSH_GAP_S)

    # -- what both event streams share ----------------------------------------------------

    async def _state_or_end(self, link: WatchLink, send: Send) -> State | None:
        """``link``'s control state while its stream goes on; else None, the ``end`` sent.

        A stream ends when the server closes, the session is gone (``closed``) or the
        link expired (``expired``), checked before every push so a page never shows
        anything after its link stopped being valid.
        """
        state = self._service.control_state(link)
        if self.closing_event().is_set() or state == "closed" or not link.live:
            reason = "expired" if state != "closed" and not link.live else "closed"
            await event(send, "end", {"reason": reason})
            return None
        return state

    async def _follow_link(
        self,
        link: WatchLink,
        receive: Receive,
        send: Send,
        wake: asyncio.Event,
        step: Callable[[], Awaitable[bool]],
        unsubscribe: Callable[[], object],
        *,
        gap_s: float = 0.0,
    ) -> None:
        """Run ``step`` as :func:`follow` does, woken by ``wake``, control changes and the
        server closing; the page counts as open meanwhile (the last control page to go
        hands back). ``unsubscribe`` ends the stream's own watch first, on any way out."""
        service = self._service
        unwatch = service.terminals.watch_control(link.owner, link.session_id, link.changed.set)
        service.page_opened(link)
        wakes = (wake, link.changed, self.closing_event())
        try:
            await follow(receive, send, wakes, step, gap_s=gap_s)
        finally:
            unsubscribe()
            unwatch()
            service.page_closed(link)
