"""What the container tests share: the shipped world config with podman, an MCP client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .podman import PODMAN, ROOT, exec_command

TOKEN = "tok-container-0123456789abcdef"


def shipped_config(name: str) -> dict[str, Any]:
    """deploy/worlds/harness-config.json with only the ``kubectl ... --`` prefix swapped."""
    config = json.loads((ROOT / "deploy" / "worlds" / "harness-config.json").read_text())
    [entry] = config["worlds"]["worlds"].values()
    command = entry["command"]
    assert command[0] == "kubectl"
    entry["command"] = [PODMAN, "exec", "-i", name, *command[command.index("--") + 1 :]]
    assert entry["command"][3:] == exec_command(name)[3:]
    return dict(config)


@asynccontextmanager
async def mcp_session(url: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def value_of(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content
