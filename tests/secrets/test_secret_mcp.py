"""Asking the person for a secret through the MCP SDK client's URL-mode elicitation.

The server runs as a real subprocess over stdio; the client's elicitation callback plays
the person: it opens the page the server names, and submits the form, declines or
cancels. Every message the client receives and the server's log are scanned afterwards.
"""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from ..browser import headless_page, needs_chromium
from .support import digest, fill_secret_page

SECRET = "päss wörd:42 <&>"
TEST_BOUND_S = 90
BROWSE_BOUND_S = 60

Person = Callable[[types.ElicitRequestURLParams], Awaitable[types.ElicitResult]]


class Client:
    """An SDK client whose elicitation callback is the test's person; it keeps every message."""

    def __init__(self, session: ClientSession, seen: list[str]) -> None:
        self.session = session
        self.seen = seen

    async def call(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        result = await self.session.call_tool(name, args)
        self.seen.append(result.model_dump_json())
        return result


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@contextlib.asynccontextmanager
async def mcp_client(
    tmp_path: Path, person: Person | None, config: dict[str, Any] | None = None
) -> AsyncIterator[Client]:
    args = ["-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
    args += ["--workspace", str(tmp_path)]
    if config is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config))
        args += ["--config", str(path)]
    params = StdioServerParameters(command=sys.executable, args=args, cwd=tmp_path)
    seen: list[str] = []

    async def elicit(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.model_dump_json())
        assert isinstance(params, types.ElicitRequestURLParams), params
        assert person is not None
        return await person(params)

    async def keep(message: Any) -> None:
        seen.append(repr(message))

    with (tmp_path / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(
                read,
                write,
                elicitation_callback=elicit if person is not None else None,
                message_handler=keep,
            ) as session,
        ):
            await session.initialize()
            yield Client(session, seen)
    seen.append((tmp_path / "server.log").read_text())


async def at_password_prompt(client: Client) -> str:
    opened = await client.call("terminal_open", {"type": "shell"})
    sid = str(opened.structured_content["sessionId"])
    sent = await client.call(
        "terminal_send", {"sessionId": sid, "text": "read -r -s -p 'Vault password: ' pw"}
    )
    assert sent.structured_content["inputHidden"] is True, text_of(sent)
    return sid


class Response:
    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text


def _fetch(url: str, data: bytes | None) -> Response:
    try:
        with urllib.request.urlopen(url, data=data, timeout=30) as answer:
            return Response(answer.status, answer.read().decode())
    except urllib.error.HTTPError as refused:
        return Response(refused.code, refused.read().decode())


async def fetch(url: str) -> Response:
    return await anyio.to_thread.run_sync(_fetch, url, None)


async def submit(url: str, value: str) -> Response:
    body = urllib.parse.urlencode({"secret": value}).encode()
    return await anyio.to_thread.run_sync(_fetch, url, body)


async def test_accept_after_submitting_then_decline_and_cancel(tmp_path: Path) -> None:
    answers: list[str] = []
    pages: list[str] = []

    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        action = answers.pop(0)
        pages.append(params.url)
        assert params.url.startswith("http://127.0.0.1:") and "/secret/" in params.url
        assert "Vault password:" in params.message and "unlock the vault" in params.message
        if action == "accept":
            page = await fetch(params.url)
            assert page.status_code == 200
            for shown in ("Vault password:", "unlock the vault", "pty-", "name=secret"):
                assert shown in page.text
            assert "type=password" in page.text
            sent = await submit(params.url, SECRET)
            assert sent.status_code == 200 and "goes to terminal session" in sent.text
            again = await submit(params.url, "second try")
            assert again.status_code == 410 and "Already used" in again.text
        return types.ElicitResult(action=action)  # type: ignore[arg-type]

    with anyio.fail_after(TEST_BOUND_S):
        async with mcp_client(tmp_path, person) as client:
            sid = await at_password_prompt(client)
            for refusal in ("decline", "cancel"):
                answers.append(refusal)
                result = await client.call(
                    "terminal_send", {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
                )
                assert result.is_error and text_of(result).startswith("error [SECRET_DECLINED]")
                # Nothing was typed: the page of a declined ask is gone, the prompt waits.
                gone = await submit(pages[-1], "late")
                assert gone.status_code == 410
            answers.append("accept")
            typed = await client.call(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
            )
            assert not typed.is_error, text_of(typed)
            assert typed.structured_content["waitReason"] == "stdin_read"
            shown = await client.call(
                "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
            )
            assert digest(SECRET) in text_of(shown)
            await client.call("terminal_read", {"sessionId": sid})
            await client.call("terminal_close", {"sessionId": sid})
    assert len(pages) == 3 and len(set(pages)) == 3
    for text in client.seen:
        assert SECRET not in text and "second try" not in text


async def test_an_expired_page_is_refused(tmp_path: Path) -> None:
    urls: list[str] = []

    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        urls.append(params.url)
        return types.ElicitResult(action="accept")  # agrees, then never submits

    config = {"secrets": {"page_valid_ms": 1500}}
    with anyio.fail_after(TEST_BOUND_S):
        async with mcp_client(tmp_path, person, config) as client:
            sid = await at_password_prompt(client)
            result = await client.call(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "expiry"}}
            )
            assert result.is_error and text_of(result).startswith("error [NO_SECRET]")
            assert "expired" in text_of(result)
            late = await submit(urls[0], SECRET)
            assert late.status_code == 410 and "Expired" in late.text
            prompt = await client.call("terminal_send", {"sessionId": sid, "secret": {"ask": "x"}})
            assert prompt.is_error  # expired again, but the prompt itself still waits
            session = await client.call(
                "terminal_send", {"sessionId": sid, "text": "", "submit": False, "timeoutMs": 500}
            )
            assert session.structured_content["inputHidden"] is True
    for text in client.seen:
        assert SECRET not in text


async def test_a_client_without_url_elicitation_gets_no_secret(tmp_path: Path) -> None:
    with anyio.fail_after(TEST_BOUND_S):
        async with mcp_client(tmp_path, None) as client:
            sid = await at_password_prompt(client)
            result = await client.call("terminal_send", {"sessionId": sid, "secret": {"ask": "x"}})
            assert result.is_error and text_of(result).startswith("error [NO_SECRET]")
            assert "URL-mode elicitation" in text_of(result)


@needs_chromium
async def test_headless_chromium_fills_in_the_page(tmp_path: Path) -> None:
    shown: list[tuple[str, str]] = []

    async def person(params: types.ElicitRequestURLParams) -> types.ElicitResult:
        # The server withdraws its elicitation request (notifications/cancelled) as soon as
        # the form arrives; the person still reads the page that comes back, so the client
        # cancelling this handler must not cut the browsing short.
        with anyio.fail_after(BROWSE_BOUND_S, shield=True):
            async with headless_page() as page:
                shown.append(await fill_secret_page(page, params.url, SECRET))
        return types.ElicitResult(action="accept")

    with anyio.fail_after(TEST_BOUND_S):
        async with mcp_client(tmp_path, person) as client:
            sid = await at_password_prompt(client)
            typed = await client.call(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "unlock the vault"}}
            )
            assert not typed.is_error, text_of(typed)
            check = await client.call(
                "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
            )
            assert digest(SECRET) in text_of(check)
    ((before, after),) = shown
    assert f"Secret for terminal session {sid}" in before
    assert "Vault password:" in before and "unlock the vault" in before
    assert f"goes to terminal session {sid}" in after
    (tmp_path / "page.txt").write_text(before)
    for text in client.seen:
        assert SECRET not in text
