"""Fixtures shared by the provider tests: real terminal processes, always torn down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dsh_terminal_core.provider import (
    LocalTerminalProcess,
    LocalTerminalProvider,
    TerminalSpawnSpec,
)

from ..helpers import Spawn


@pytest.fixture
async def spawn(request: pytest.FixtureRequest) -> AsyncIterator[Spawn]:
    """Start terminal processes on one provider; every one is terminated after the test.

    A test module that sets ``SPAWN_ENV`` gets it as the default ``env`` of each spawn
    (the interactive-bash modules use it for a known prompt).
    """
    provider = LocalTerminalProvider()
    spawned: list[LocalTerminalProcess] = []
    default_env: dict[str, str] | None = getattr(request.module, "SPAWN_ENV", None)

    async def _spawn(argv: list[str], **fields: Any) -> LocalTerminalProcess:
        if default_env is not None:
            fields.setdefault("env", dict(default_env))
        process = await provider.spawn_terminal(TerminalSpawnSpec(argv=argv, **fields))
        spawned.append(process)
        return process

    yield _spawn
    for process in spawned:
        await process.terminate()
