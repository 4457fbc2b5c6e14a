"""Asking the person at an MCP client for a secret: a one-time page and URL-mode elicitation.

The MCP specification forbids asking for credentials in form mode (the answer would
pass through the client and so, often, the model). Instead the server serves a page on
127.0.0.1 — a random port, an unguessable path, valid for a limited time, refused
after its first submission or its expiry — naming the session, the prompt line and the
reason, with one password field ``secret`` posted back to the same URL as a form. It
sends ``elicitation/create`` with ``mode: "url"`` and that URL; the person opens it and
types the secret, which goes browser → server → terminal. The tool call waits for the
submission, the client's decline or cancel (``SECRET_DECLINED``) or the expiry
(``NO_SECRET``). A client that does not declare URL-mode elicitation gets ``NO_SECRET``.
That is the 2025-11-25 revision; on 2026-07-28 the same page is offered through the
call's own result instead (:mod:`.mcp_asks`).

The value never reaches a log line, an exception text or a response: request parsing
errors name only what was wrong, and the page's answers never echo what was posted.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import secrets
import time
import urllib.parse
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ..kernel.errors import DshError
from ..kernel.secret import Secret, SecretAsk, check_secret_text

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext

__all__ = [
    "PAGE_VALID_S",
    "SecretPage",
    "SecretPages",
    "ask_by_url",
    "ask_message",
    "declined",
    "supports_url_elicitation",
]

log = logging.getLogger(__name__)

PAGE_VALID_S = 300.0
"""How long a page accepts its one submission: five minutes."""

_MAX_HEAD = 16 * 1024
_MAX_BODY = 64 * 1024
_IO_BOUND_S = 30.0
_REMEMBERED = 256  # used and expired paths still answered "gone" instead of "not found"


class SecretPage:
    """One page asking for one secret; ``submitted`` resolves with it, or fails."""

    def __init__(self, ask: SecretAsk, url: str, token: str, valid_s: float) -> None:
        self.ask = ask
        self.url = url
        self.token = token
        self.expires_at = time.time() + valid_s
        self.state = "open"  # open → used | expired | withdrawn
        self.submitted: asyncio.Future[Secret] = asyncio.get_running_loop().create_future()
        self._timer = asyncio.get_running_loop().call_later(valid_s, self._expire)

    def _expire(self) -> None:
        if self.state == "open":
            self.state = "expired"
            if not self.submitted.done():
                self.submitted.set_exception(
                    DshError(
                        f"nobody typed the secret for session {self.ask.session_id} into its "
                        "page before the page expired; nothing was sent",
                        "NO_SECRET",
                    )
                )

    def accept(self, secret: Secret) -> None:
        self.state = "used"
        self._timer.cancel()
        if not self.submitted.done():
            self.submitted.set_result(secret)

    def withdraw(self) -> None:
        """The ask ended another way (declined, cancelled, the call went away)."""
        self._timer.cancel()
        if self.state == "open":
            self.state = "withdrawn"
        if not self.submitted.done():
            self.submitted.cancel()


class SecretPages:
    """The loopback HTTP server behind every page of one MCP server; started on first use."""

    def __init__(self, valid_s: float = PAGE_VALID_S) -> None:
        self.valid_s = valid_s
        self._server: asyncio.Server | None = None
        self._port = 0
        self._pages: OrderedDict[str, SecretPage] = OrderedDict()
        self._starting = asyncio.Lock()

    async def open(self, ask: SecretAsk, valid_s: float | None = None) -> SecretPage:
        """A new page for ``ask`` with its own unguessable path."""
        await self._start()
        token = secrets.token_urlsafe(32)
        url = f"http://127.0.0.1:{self._port}/secret/{token}"
        page = SecretPage(ask, url, token, self.valid_s if valid_s is None else valid_s)
        self._pages[token] = page
        while len(self._pages) > _REMEMBERED:
            self._pages.popitem(last=False)[1].withdraw()
        return page

    async def _start(self) -> None:
        async with self._starting:
            if self._server is None:
                self._server = await asyncio.start_server(
                    self._serve, host="127.0.0.1", port=0, limit=_MAX_HEAD
                )
                self._port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        for page in self._pages.values():
            page.withdraw()
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    # -- HTTP -----------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_IO_BOUND_S):
                status, body = await self._answer(reader)
            await _respond(writer, status, body)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except ValueError:  # an oversized request head
            with contextlib.suppress(Exception):
                await _respond(
                    writer, 400, _message_page("Bad request", "The request is too large.")
                )
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, str]:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        request_line, *header_lines = head.split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            return 400, _message_page("Bad request", "The request line is malformed.")
        method, target, _version = parts
        headers = {}
        for line in header_lines:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        if headers.get("host") != f"127.0.0.1:{self._port}":
            return 421, _message_page(
                "Wrong address", "Open the page at the address you were given."
            )
        page = self._find(urllib.parse.urlsplit(target).path)
        if page is None:
            return 404, _message_page("Not found", "There is no page at this address.")
        if page.state == "used":
            return 410, _message_page("Already used", "This page was used once and works no more.")
        if page.state != "open":
            return 410, _message_page("Expired", "This page has expired or was withdrawn.")
        if method == "GET":
            return 200, _form_page(page, "")
        if method != "POST":
            return 405, _message_page("Not allowed", "Only GET and POST are answered here.")
        length = headers.get("content-length", "")
        if not length.isdigit() or int(length) > _MAX_BODY:
            return 413, _message_page("Too large", "The submission is too large.")
        body = await reader.readexactly(int(length))
        content_type = headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/x-www-form-urlencoded":
            return 415, _message_page("Unsupported", "Submit the page's own form.")
        try:
            fields = urllib.parse.parse_qs(
                body.decode("ascii"),
                keep_blank_values=True,
                strict_parsing=False,
                encoding="utf-8",
                errors="strict",
            )
        except (UnicodeDecodeError, ValueError):
            return 400, _form_page(page, "The submission could not be read; type it again.")
        values = fields.get("secret", [])
        if len(values) != 1:
            return 400, _form_page(page, "Type the secret into the field.")
        secret = Secret(values[0])
        try:
            check_secret_text(secret)
        except DshError:
            return 400, _form_page(page, "The secret must be one non-empty line; type it again.")
        if page.state != "open":  # expired while the body arrived
            return 410, _message_page("Expired", "This page has expired or was withdrawn.")
        page.accept(secret)
        log.info("secret page for session %s was submitted", page.ask.session_id)
        return 200, _message_page(
            "Sent",
            f"The secret goes to terminal session {page.ask.session_id} now. "
            "You can close this page.",
        )

    def _find(self, path: str) -> SecretPage | None:
        prefix = "/secret/"
        if not path.startswith(prefix):
            return None
        wanted = path[len(prefix) :]
        for token, page in self._pages.items():
            if secrets.compare_digest(token.encode(), wanted.encode()):
                return page
        return None


async def _respond(writer: asyncio.StreamWriter, status: int, body: str) -> None:
    reasons = {
        200: "OK",
        400: "Bad Request",
        404: "Not Found",
        405: "Method Not Allowed",
        410: "Gone",
        413: "Payload Too Large",
        415: "Unsupported Media Type",
        421: "Misdirected Request",
    }
    data = body.encode("utf-8")
    head = (
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}\r\n"
        "Content-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(data)}\r\n"
        "Cache-Control: no-store\r\n"
        "Referrer-Policy: no-referrer\r\n"
        "X-Frame-Options: DENY\r\n"
        "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'; "
        "form-action 'self'; frame-ancestors 'none'\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode("latin-1") + data)
    await writer.drain()


_STYLE = (
    "body{font-family:sans-serif;max-width:36em;margin:3em auto;padding:0 1em}"
    "pre{background:#f4f4f4;padding:.5em;white-space:pre-wrap}"
    "input{font-size:1.1em;padding:.3em;width:100%;box-sizing:border-box}"
    "button{font-size:1.1em;margin-top:1em}.error{color:#a00}"
)


def _document(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    )


def _message_page(title: str, text: str) -> str:
    return _document(title, f"<h1>{html.escape(title)}</h1><p>{html.escape(text)}</p>")


def _form_page(page: SecretPage, error: str) -> str:
    ask = page.ask
    expires = time.strftime("%H:%M:%S UTC", time.gmtime(page.expires_at))
    problem = f"<p class=error>{html.escape(error)}</p>" if error else ""
    body = (
        f"<h1>Secret for terminal session {html.escape(ask.session_id)}</h1>"
        "<p>A program in this terminal session is waiting at a password prompt:</p>"
        f"<pre id=prompt>{html.escape(ask.prompt) or '(no prompt text)'}</pre>"
        f"<p>Reason given: <strong id=reason>{html.escape(ask.reason)}</strong></p>"
        "<p>What you type here is typed into the terminal with echo off. It does not "
        "pass through the assistant or its client, and it is not shown in the "
        f"terminal's output. This page works once and expires at {expires}.</p>"
        f"{problem}"
        f'<form method=post action="/secret/{html.escape(page.token)}" '
        "accept-charset=utf-8 autocomplete=off>"
        "<label for=secret>Secret</label>"
        "<input id=secret name=secret type=password autofocus required>"
        "<button id=send type=submit>Send to the terminal</button></form>"
    )
    return _document(f"Secret for {ask.session_id}", body)


# -- the elicitation ----------------------------------------------------------------------


def supports_url_elicitation(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the client of ``ctx`` declared URL-mode elicitation (either revision)."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


def declined(action: str) -> str:
    """The past tense of a refusing elicitation action, for an error message."""
    return {"decline": "declined", "cancel": "cancelled"}.get(action, action)


def ask_message(ask: SecretAsk) -> str:
    """What the client shows its person beside the page's URL."""
    return (
        f"Terminal session {ask.session_id} is waiting at a password prompt "
        f"({ask.prompt.strip() or 'no prompt text'}). Reason: {ask.reason}. Open the page "
        "to type the secret; it goes straight to the terminal, not to the assistant."
    )


async def ask_by_url(ctx: ServerRequestContext[Any], pages: SecretPages, ask: SecretAsk) -> Secret:
    """Ask the person at the client of ``ctx`` for one secret through a page of ``pages``."""
    if not supports_url_elicitation(ctx):
        raise DshError(
            "the MCP client does not declare URL-mode elicitation, so the person cannot be "
            "asked for the secret without it passing through the client; use a named "
            "secret instead; nothing was sent",
            "NO_SECRET",
        )
    page = await pages.open(ask)
    message = ask_message(ask)
    # Tied to the tool call where its channel can carry a request (stdio, SSE responses);
    # otherwise (HTTP with plain JSON responses) on the connection's own stream.
    related = ctx.request_id if ctx.session.can_send_request else None
    elicit = asyncio.ensure_future(
        ctx.session.elicit_url(message, page.url, page.token, related_request_id=related)
    )
    try:
        waiters: set[asyncio.Future[Any]] = {page.submitted, elicit}
        done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if page.submitted not in done:
            try:
                answer = elicit.result()
            except Exception as exc:
                raise DshError(
                    f"the client could not show the secret page ({type(exc).__name__}); "
                    "nothing was sent",
                    "NO_SECRET",
                ) from None
            if answer.action != "accept":
                raise DshError(
                    f"the person {declined(answer.action)} the request for a secret for session "
                    f"{ask.session_id}; nothing was sent",
                    "SECRET_DECLINED",
                )
        return await page.submitted
    finally:
        page.withdraw()
        if not elicit.done():
            elicit.cancel()
            with contextlib.suppress(BaseException):
                await elicit
