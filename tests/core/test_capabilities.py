"""Capabilities are declared (protocols, backend flags), and the registry answers for them."""

from __future__ import annotations

import pytest

from dsh_terminal_bash import BashBackend, BashConfig
from dsh_terminal_core import Agent, ErrorCode, TerminalError
from dsh_terminal_core.registry import (
    LineTailSession,
    MarkedBackend,
    SpawnRequest,
    TerminalBackend,
    TerminalSessionService,
)
from dsh_terminal_core.testing import FakeBackend


class LinedBackend(FakeBackend):
    """A fake whose sessions declare the line-cursor capability."""

    async def spawn(self, context):  # type: ignore[no-untyped-def]
        session = await super().spawn(context)
        session.complete_lines_since = lambda cursor: (["one", "two"][cursor:], 2)  # type: ignore[attr-defined]
        return session


async def test_complete_lines_since_is_unsupported_for_a_backend_without_it() -> None:
    service = TerminalSessionService()
    service.register_backend(FakeBackend("plain"))
    owner = Agent("a")
    spawned = await service.spawn(owner, SpawnRequest(type="plain"))
    assert not isinstance(service.get_session(owner, spawned.session_id), LineTailSession)
    with pytest.raises(TerminalError) as caught:
        service.complete_lines_since(owner, spawned.session_id, 0)
    assert caught.value.code == ErrorCode.UNSUPPORTED
    assert "complete_lines_since" in str(caught.value)
    intruder = Agent("b")
    with pytest.raises(TerminalError) as foreign:
        service.complete_lines_since(intruder, spawned.session_id, 0)
    assert foreign.value.code == "FOREIGN_SESSION"
    await owner.dispose()


async def test_complete_lines_since_reaches_a_session_that_declares_it() -> None:
    service = TerminalSessionService()
    service.register_backend(LinedBackend("lined"))
    owner = Agent("a")
    spawned = await service.spawn(owner, SpawnRequest(type="lined"))
    assert service.complete_lines_since(owner, spawned.session_id, 1) == (["two"], 2)
    await owner.dispose()


def test_exports_env_is_a_declared_backend_flag() -> None:
    service = TerminalSessionService()
    bash = BashBackend(None, None, None, BashConfig())  # type: ignore[arg-type]
    fake = FakeBackend("fake")
    assert isinstance(bash, TerminalBackend) and isinstance(fake, TerminalBackend)
    service.register_backend(bash)
    service.register_backend(fake)
    assert service.backend_exports_env("shell") is True
    assert service.backend_exports_env("fake") is False
    assert service.backend_exports_env("nobody-registered-this") is False


def test_the_process_marker_is_declared_by_the_backend() -> None:
    service = TerminalSessionService()
    bash = BashBackend(None, None, None, BashConfig())  # type: ignore[arg-type]
    assert isinstance(bash, MarkedBackend)
    assert not isinstance(FakeBackend("fake"), MarkedBackend)
    service.register_backend(bash)
    service.register_backend(FakeBackend("fake"))
    assert service.process_markers("agent-7") == [{"DSH_SHELL": "1", "DSH_SESSION_ID": "agent-7"}]
