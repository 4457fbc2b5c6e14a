"""Shared helpers for tests that drive real terminals through the harness."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import psutil
import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider import LocalTerminalProcess
from dsh_terminal_core.provider.forkclient import server_script
from dsh_terminal_core.registry import SendRequest, SendResult, SpawnRequest

# The model-facing tools of the terminal tool plugin, in the order it registers them.
TERMINAL_TOOLS = (
    "terminal_open",
    "terminal_send",
    "terminal_read",
    "terminal_signal",
    "terminal_close",
    "terminal_list",
    "terminal_resize",
    "terminal_watch",
    "terminal_ask_human",
    "terminal_search",
)


def full_access(workspace: str | None = None, **sections: Mapping[str, Any]) -> dict[str, Any]:
    """Harness config running shells unconfined (tests of the sandbox opt in to bwrap)."""
    policy: dict[str, Any] = {"mode": "danger-full-access"}
    if workspace is not None:
        policy["workspace_root"] = workspace
    return {"sandbox-policy": policy, **sections}


#: ``DSH_TEST_WORLD=ns`` runs every shell the helpers open in an execution world: the
#: world agent in its own pid, IPC and UTS namespaces (SPEC §21), given the test's own
#: ``terminal-bash`` section. The readiness suites run so in ``tests/worlds``.
TEST_WORLD = os.environ.get("DSH_TEST_WORLD")


def in_world(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with every spawn sent to the test world, when one is asked for."""
    config = dict(config)
    if not TEST_WORLD:
        return config
    world_sections = {k: v for k, v in config.items() if k in ("terminal-bash", "sandbox-policy")}
    handle, path = tempfile.mkstemp(prefix="dsh-test-world-", suffix=".json")
    with os.fdopen(handle, "w") as file:
        json.dump(world_sections, file)
    command = [
        shutil.which("bwrap") or "bwrap",
        "--dev-bind", "/", "/",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
        "--proc", "/proc",
        sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--config", path,
    ]  # fmt: skip
    config["worlds"] = {"worlds": {"t": {"command": command}}, "default": "t"}
    return config


def for_shell(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with its ``terminal-bash`` settings also given to the shell the suite
    runs now (``terminal-zsh``, ``terminal-fish``), so a test's timings apply to each."""
    config = dict(config)
    if shell_type != "shell" and "terminal-bash" in config:
        config.setdefault(f"terminal-{shell_type}", config["terminal-bash"])
    return config


@contextlib.asynccontextmanager
async def harness(config: Mapping[str, Any] | None = None) -> AsyncIterator[Harness]:
    async with Harness(config=in_world(for_shell(config or full_access()))) as h:
        yield h


#: The backend type :func:`open_shell` opens: ``shell`` (bash), or ``zsh`` / ``fish`` while a
#: suite runs for each shell (the ``each_shell`` fixture of ``tests/shells.py``).
shell_type = "shell"


async def open_shell(h: Harness, agent: Agent, name: str | None = None) -> str:
    result = await h.ctx.terminals.spawn(agent, SpawnRequest(type=shell_type, name=name))
    return str(result.session_id)


async def send(
    h: Harness, agent: Agent, session_id: str, text: str, submit: bool = True
) -> SendResult:
    op = h.ctx.terminals.start_send(agent, session_id, SendRequest(text=text, submit=submit))
    return await op.done  # type: ignore[no-any-return]


_FORK_SERVER = str(server_script())


def own_descendants() -> list[psutil.Process]:
    """Descendants of this process, without the terminal fork server.

    The fork server starts with the first terminal and lives as long as this process;
    the terminals it starts are still descendants and are listed.
    """
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if _FORK_SERVER not in child.cmdline():
                found.append(child)
        except psutil.Error:
            continue
    return found


Spawn = Callable[..., Awaitable[LocalTerminalProcess]]


class Output:
    """Collects a terminal process's output; waiters wake as it arrives (no sleeping)."""

    def __init__(self, process: LocalTerminalProcess) -> None:
        self.data = bytearray()
        self._changed = asyncio.Event()
        process.set_output_handler(self._feed)

    def _feed(self, chunk: bytes) -> None:
        self.data.extend(chunk)
        self._changed.set()

    async def wait_for(self, needle: bytes, count: int = 1, timeout: float = 20) -> None:
        """Wait until ``needle`` was printed ``count`` times in all."""

        async def _wait() -> None:
            while self.data.count(needle) < count:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(_wait(), timeout)

    async def wait_count(self, needle: bytes, count: int, timeout: float = 20) -> None:
        await self.wait_for(needle, count, timeout)


def live_children(proc: psutil.Process) -> set[int]:
    """Pids of ``proc``'s children that are running (not zombies)."""
    found = set()
    for child in proc.children():
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                found.add(child.pid)
    return found


async def until_true(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Re-check a process-table condition until it holds (no exit event exists for it)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    """Re-check a condition about a process until it holds; fail the test if it never does."""
    assert await until_true(check, timeout), "never satisfied"


async def let_callbacks_run(turns: int = 5) -> None:
    """A few loop turns, so callbacks a close or a settlement scheduled have run."""
    for _ in range(turns):
        await asyncio.sleep(0)


def needs(*programs: str) -> pytest.MarkDecorator:
    """Skip unless every program is on PATH (real programs are installed by .ci/run)."""
    missing = [p for p in programs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


async def call_value(h: Harness, agent: Agent, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool call that must succeed: its value."""
    result = await h.call_tool(agent, tool, args)
    assert not result.is_error, result.text
    assert isinstance(result.value, dict)
    return result.value
