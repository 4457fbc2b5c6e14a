"""``dsh-terminal attach URL`` in a real terminal: driven inside tmux (send-keys, capture-pane)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest

from ..helpers import full_access

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

BOUND_S = 90


class Tmux:
    """A tmux server of the test's own (its own socket), killed at the end."""

    def __init__(self) -> None:
        self.socket = f"dsh-attach-{uuid.uuid4().hex[:12]}"

    def run(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=10
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "t", *keys)

    def pane(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    start = ["tmux", "-L", server.socket, "-f", "/dev/null", "new-session", "-d", "-s", "t"]
    subprocess.run(
        [*start, "-x", "100", "-y", "30", "bash --norc --noprofile"],
        check=True,
        env=env,
        timeout=10,
    )
    try:
        yield server
    finally:
        subprocess.run(["tmux", "-L", server.socket, "kill-server"], timeout=10, check=False)


async def until(check: Any, timeout_s: float = 20.0) -> None:
    with anyio.fail_after(timeout_s):
        while not check():
            await anyio.sleep(0.05)


async def test_attach_watches_takes_control_types_and_restores_the_terminal(
    tmux: Tmux, tmp_path: Path
) -> None:
    with anyio.fail_after(BOUND_S):
        async with Harness(config=full_access()) as h:
            agent = h.create_agent("a")
            sid = (await h.call_tool(agent, "terminal_open", {})).value["sessionId"]
            await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo tok-$((6*7))"}
            )
            url = (
                await h.call_tool(agent, "terminal_watch", {"sessionId": sid, "control": True})
            ).value["url"]
            before, after = tmp_path / "before", tmp_path / "after"
            tmux.keys(f"stty -g > {before}", "Enter")
            await until(before.exists)
            python_path = os.environ.get("PYTHONPATH", "")
            command = (
                f"PYTHONPATH={shlex.quote(python_path)} {shlex.quote(sys.executable)} "
                f"-m dsh_terminal_core.cli attach {shlex.quote(url)}"
            )
            tmux.keys(command, "Enter")
            await until(lambda: "tok-42" in tmux.pane() and "Ctrl-] c" in tmux.pane())
            await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo live-$((1))"}
            )
            await until(lambda: "live-1" in tmux.pane())  # live output, redrawn

            tmux.keys("C-]", "c")
            await until(lambda: h.ctx.terminals.in_human_control(agent, sid))
            await until(lambda: "you have control" in tmux.pane())
            tmux.keys("echo from-tmux", "Enter")
            session = h.ctx.terminals.get_session(agent, sid)
            await until(
                lambda: "\nfrom-tmux" in session.read(ReadRequest(offset=1, count=500)).text
            )
            await until(lambda: "\nfrom-tmux" in tmux.pane())
            tmux.keys("C-]", "d")  # detaching hands back
            await until(lambda: not h.ctx.terminals.in_human_control(agent, sid))
            await until(lambda: "attach: detached" in tmux.pane())
            tmux.keys(f"stty -g > {after}", "Enter")
            await until(lambda: after.exists() and after.read_text().strip() != "")
            assert after.read_text() == before.read_text()  # the terminal's modes restored
            sent = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo x"})
            assert "human" in sent.value

            # Killed (SIGTERM) while in raw mode: the modes are restored all the same.
            tmux.keys("clear", "Enter", command, "Enter")
            await until(lambda: "Ctrl-] c" in tmux.pane())
            shell = psutil.Process(int(tmux.run("list-panes", "-F", "#{pane_pid}").strip()))
            (client,) = shell.children()
            client.send_signal(signal.SIGTERM)
            client.wait(10)
            after.unlink()
            tmux.keys(f"stty -g > {after}", "Enter")
            await until(lambda: after.exists() and after.read_text().strip() != "")
            assert after.read_text() == before.read_text()
