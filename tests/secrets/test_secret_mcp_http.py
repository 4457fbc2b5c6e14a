"""The same URL-mode elicitation over the streamable HTTP transport."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ..integration.test_mcp_http import TOKEN_A, http_server
from .support import digest
from .test_secret_mcp import SECRET, fetch, submit, text_of

TEST_BOUND_S = 120


@contextlib.asynccontextmanager
async def connect(url: str, person: Any) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {TOKEN_A}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=person) as session,
    ):
        await session.initialize()
        yield session


async def test_ask_over_http_submits_the_page(tmp_path: Path) -> None:
    seen: list[str] = []

    async def person(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        page = await fetch(params.url)
        assert page.status_code == 200 and "Vault password:" in page.text
        sent = await submit(params.url, SECRET)
        assert sent.status_code == 200
        return types.ElicitResult(action="accept")

    with anyio.fail_after(TEST_BOUND_S):
        async with http_server(tmp_path) as server, connect(server.url, person) as session:
            opened = await session.call_tool("terminal_open", {"type": "shell"})
            sid = opened.structured_content["sessionId"]
            waiting = await session.call_tool(
                "terminal_send", {"sessionId": sid, "text": "read -r -s -p 'Vault password: ' pw"}
            )
            assert waiting.structured_content["inputHidden"] is True
            typed = await session.call_tool(
                "terminal_send", {"sessionId": sid, "secret": {"ask": "over http"}}
            )
            assert not typed.is_error, text_of(typed)
            shown = await session.call_tool(
                "terminal_send", {"sessionId": sid, "text": 'printf %s "$pw" | sha256sum'}
            )
            assert digest(SECRET) in text_of(shown)
            for result in (opened, waiting, typed, shown):
                seen.append(result.model_dump_json())
            await session.call_tool("terminal_close", {"sessionId": sid})
        seen.append(server.log)
    for text in seen:
        assert SECRET not in text
