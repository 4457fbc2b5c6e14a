"""Shared pieces of the secret tests: a harness, a leak scan, a person filling in the page."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.kernel.tools import ToolResult
from dsh_terminal_core.registry import SearchRequest

from ..helpers import full_access

if TYPE_CHECKING:
    from playwright.async_api import Page


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


async def fill_secret_page(page: Page, url: str, secret: str) -> tuple[str, str]:
    """Open ``url``, type ``secret`` into its field and send the form, as a person would.

    Returns the text of the page as shown, and of the page the form's answer brought.
    """
    await page.goto(url)
    before = await page.inner_text("body")
    await page.click("#secret")
    await page.keyboard.type(secret)
    async with page.expect_navigation():
        await page.click("#send")
    return before, await page.inner_text("body")


def entry_point_plugins() -> list[object]:
    return [ep.load() for ep in importlib.metadata.entry_points(group="dsh.plugins")]


@contextlib.asynccontextmanager
async def secret_harness(
    secrets: Mapping[str, Any], *, extra: list[object] | None = None, workspace: str | None = None
) -> AsyncIterator[Harness]:
    plugins = None if extra is None else [*entry_point_plugins(), *extra]
    async with Harness(plugins, config=full_access(workspace, secrets=secrets)) as h:
        yield h


class Transcript:
    """Every result and scrollback page of a test, and what the loggers said, to scan."""

    def __init__(self, h: Harness, agent: Agent, caplog: pytest.LogCaptureFixture) -> None:
        self.h = h
        self.agent = agent
        self.caplog = caplog
        self.seen: list[str] = []
        caplog.set_level(logging.DEBUG)

    async def call(self, name: str, args: Mapping[str, Any], **kw: Any) -> ToolResult:
        result = await self.h.call_tool(self.agent, name, args, **kw)
        self.seen.append(result.text)
        self.seen.append(json.dumps(result.value))
        return result

    async def scrollback(self, session_id: str) -> str:
        page = await self.call("terminal_read", {"sessionId": session_id, "count": 10000})
        return page.text

    async def assert_never_shows(self, session_id: str, *secrets: str) -> None:
        """No byte sequence of any secret in any result, scrollback read, search or log record."""
        await self.scrollback(session_id)
        # Searched through the registry, not the tool: the audit log keeps a tool's
        # arguments, and a search for the secret would put it there.
        for secret in secrets:
            for fold in (False, True):
                request = SearchRequest(pattern=secret, ignore_case=fold)
                found = await self.h.ctx.terminals.search(self.agent, session_id, request)
                assert found.matches == (), found
        every = {"sessionId": session_id, "pattern": ".", "regex": True, "maxMatches": 200}
        await self.call("terminal_search", every)  # its lines are scanned below
        texts = [*self.seen, self.caplog.text, *(repr(r.__dict__) for r in self.caplog.records)]
        for secret in secrets:
            for text in texts:
                assert secret not in text
                assert secret.encode() not in text.encode("utf-8", "surrogateescape")
