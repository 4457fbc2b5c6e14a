"""Threaded and socket-driven programs settle exactly, and never wrongly (SPEC §28).

Real programs in real screen sessions through ``terminal_send``, production timing
defaults. nvim's input thread goes back to waiting on the terminal 3-6 ms before its main
thread has run the keys it passed on; before the all-threads rule a send settled there
(``:q!`` with nvim still on screen). Each nvim round checks what the settled send claims
against what the editor did: the typed text is on the screen, the file is written, the
shell's prompt carries the exit code.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="exact probe")

ROUNDS = 25
BUDGET_MS = 15_000
TEXTUAL_APP = str(Path(__file__).parents[1] / "fixtures" / "textual_app.py")


def _needs(*programs: str) -> pytest.MarkDecorator:
    missing = [p for p in programs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def _needs_module(name: str) -> pytest.MarkDecorator:
    try:
        __import__(name)
    except ImportError:
        return pytest.mark.skipif(True, reason=f"needs the {name} package")
    return pytest.mark.skipif(False, reason="")


async def _send(h: Harness, agent: Agent, sid: str, **args: Any) -> dict[str, Any]:
    result = await h.call_tool(
        agent, "terminal_send", {"sessionId": sid, "timeoutMs": BUDGET_MS, **args}
    )
    assert not result.is_error, result.text
    assert isinstance(result.value, dict)
    return result.value


def _text_of(path: Path) -> str:
    """The file as nvim left it; empty before its first write."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _screen_text(value: dict[str, Any]) -> str:
    screen = value.get("screen")
    return str(screen.get("text", "")) if isinstance(screen, dict) else ""


def _alternate(value: dict[str, Any]) -> bool:
    screen = value.get("screen")
    return bool(screen.get("alternate")) if isinstance(screen, dict) else False


async def nvim_round(
    h: Harness, agent: Agent, sid: str, path: Path, token: str, wrong: Counter[str]
) -> None:
    """One round of nvim: open, type in insert mode, ``:w``, ``:q!``; count wrong settles.

    A settle is wrong when it says ``stdin_read`` while what was typed has not been done:
    the typed token is not on the screen yet, the file does not hold it yet, or (after
    ``:q!``) nvim is still on screen or the prompt's exit code is missing.
    """
    opened = await _send(h, agent, sid, text=f"nvim --clean -n {path}")
    assert opened["waitReason"] in ("stdin_read", "inferred_idle"), opened
    typed = await _send(h, agent, sid, text=f"i{token}", submit=False)
    if typed["waitReason"] == "stdin_read" and token not in _screen_text(typed):
        wrong["insert"] += 1
    await _send(h, agent, sid, keys=["Escape"])
    written = await _send(h, agent, sid, text=":w")
    if written["waitReason"] == "stdin_read" and token not in _text_of(path):
        wrong["write"] += 1
    left = await _send(h, agent, sid, text=":q!")
    if left["waitReason"] == "stdin_read" and (left["exitCode"] != 0 or _alternate(left)):
        wrong["quit"] += 1
    if left["exitCode"] is None:
        # Still in nvim (a wrong settle, or a slow quit): make sure it is gone before the
        # next round, so one miss never cascades into the rounds after it.
        again = await _send(h, agent, sid, text="", submit=False)
        assert (again["waitReason"], again["exitCode"]) == ("stdin_read", 0), again


@pytest.fixture
async def both_cores_busy() -> AsyncIterator[None]:
    """Two processes spinning on the CPU for the test, killed and reaped after it."""
    spinners = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
        for _ in range(2)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            await spinner.wait()


@_needs("nvim")
async def test_nvim_never_settles_before_it_has_run_the_keys(tmp_path: Path) -> None:
    await _nvim_rounds(tmp_path)


@_needs("nvim")
async def test_nvim_never_settles_early_with_both_cores_busy(
    tmp_path: Path, both_cores_busy: None
) -> None:
    await _nvim_rounds(tmp_path)


async def _nvim_rounds(tmp_path: Path) -> None:
    wrong: Counter[str] = Counter()
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"screen": True})
        sid = str(opened.value["sessionId"])
        for i in range(ROUNDS):
            await nvim_round(h, agent, sid, tmp_path / f"round{i}.txt", f"token{i}x", wrong)
    assert not wrong, dict(wrong)


async def _settles_exactly(
    start: dict[str, Any], keys: list[dict[str, Any]], quit_: dict[str, Any]
) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"screen": True})
        sid = str(opened.value["sessionId"])
        loop = asyncio.get_running_loop()
        began = loop.time()
        shown = await _send(h, agent, sid, **start)
        took = loop.time() - began
        assert (shown["waitReason"], shown["exitCode"]) == ("stdin_read", None), (took, shown)
        for key in keys:
            moved = await _send(h, agent, sid, **key)
            assert moved["waitReason"] == "stdin_read", (key, moved)
        left = await _send(h, agent, sid, **quit_)
        if left["exitCode"] is None:
            left = await _send(h, agent, sid, text="", submit=False)
        assert (left["waitReason"], left["exitCode"]) == ("stdin_read", 0), left


@_needs("nvim")
async def test_nvim_settles_stdin_read_with_no_silence(tmp_path: Path) -> None:
    await _settles_exactly(
        {"text": f"nvim --clean -n {tmp_path / 'f.txt'}"},
        [{"text": "ihello", "submit": False}, {"keys": ["Escape"]}],
        {"text": ":q!"},
    )


@_needs_module("textual")
async def test_a_textual_app_settles_stdin_read() -> None:
    await _settles_exactly(
        {"text": f"{sys.executable} {TEXTUAL_APP}"},
        [{"keys": ["Down"]}, {"keys": ["Down"]}],
        {"keys": ["q"]},
    )


@_needs_module("IPython")
async def test_ipython_settles_stdin_read() -> None:
    await _settles_exactly(
        {"text": f"{sys.executable} -m IPython --no-banner --HistoryManager.enabled=False"},
        [{"text": "6 * 7"}],
        {"text": "exit"},
    )


@_needs("fzf")
async def test_fzf_settles_stdin_read_by_its_recurring_poll() -> None:
    # Go's runtime wakes every 100 ms (its netpoller and sysmon), so fzf is judged by the
    # recurring-poll rule over every thread; seq has exited, leaving fzf alone in its group
    # with a drained pipe on its stdin.
    await _settles_exactly(
        {"text": "seq 100 | fzf > /dev/null"},
        [{"keys": ["Up"]}, {"keys": ["Up"]}],
        {"keys": ["Enter"]},
    )


# A prompt on the main thread while a second thread wakes every 100 ms: idle, or burning
# 30 ms of CPU after each wake (about 23 % of the time) without printing anything.
_TICKER = (
    "import threading, time\n"
    "def tick():\n"
    "    while True:\n"
    "        time.sleep(0.1)\n"
    "        end = time.monotonic() + {work}\n"
    "        while time.monotonic() < end: pass\n"
    "threading.Thread(target=tick, daemon=True).start()\n"
    "input('ready> ')\n"
)


@pytest.mark.parametrize(("work", "expected"), [(0, "stdin_read"), (0.03, "inferred_idle")])
async def test_a_thread_waking_on_a_short_timer_is_judged_by_its_busy_share(
    tmp_path: Path, work: float, expected: str
) -> None:
    script = tmp_path / "ticker.py"
    script.write_text(_TICKER.format(work=work))
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"screen": True})
        sid = str(opened.value["sessionId"])
        shown = await _send(h, agent, sid, text=f"{sys.executable} {script}")
        assert shown["waitReason"] == expected, shown
        assert "ready>" in str(shown["viewport"])
        left = await _send(h, agent, sid, text="")
        assert (left["waitReason"], left["exitCode"]) == ("stdin_read", 0), left
