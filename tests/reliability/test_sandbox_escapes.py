"""Escapes from a confined shell fail: host processes, host /tmp and /run sockets, the
host's loopback services, socket variables, capabilities, ``/proc/<pid>/root``.

Each attempt is made from inside a shell opened and driven through the real tools
(``escape_driver``), in both confined modes, with ``network`` none and host, as the
user running the suite and — when the suite runs as root and the machine allows it — as
an unprivileged throwaway uid. The only thing ``network = "host"`` lets through is the
host's TCP service on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.harness import Harness

from ._support import BWRAP_USABLE
from .escape_driver import run_escapes

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap is not usable here"),
]

DRIVER = Path(__file__).with_name("escape_driver.py")
NOBODY = 65534
ESCAPES = {
    "signal a host process",
    "ptrace a host process",
    "see host pids in /proc",
    "write the host's /tmp",
    "reach a socket in the host's /tmp",
    "connect to a unix socket under /run",
    "connect to a host TCP service on 127.0.0.1",
    "read a socket variable from the environment",
    "load a kernel module",
    "change a network interface",
    "keep any capability",
    "write through /proc/<host pid>/root",
}
MODES = ["read-only", "workspace-write"]
NETWORKS = ["none", "host"]


def _check(report: dict[str, dict[str, Any]], network: str) -> None:
    assert set(report) == ESCAPES
    through = {name for name, outcome in report.items() if outcome["escaped"]}
    allowed = {"connect to a host TCP service on 127.0.0.1"} if network == "host" else set()
    details = {name: report[name]["detail"] for name in through ^ allowed}
    assert through == allowed, details


@pytest.fixture
def places() -> Iterator[dict[str, str]]:
    """A workspace, a directory outside it and /tmp, and a directory under /run."""
    base = Path(tempfile.mkdtemp(prefix="dsh-escape-", dir="/var/tmp"))
    (base / "ws").mkdir()
    (base / "out").mkdir()
    try:
        run_dir = tempfile.mkdtemp(prefix="dsh-escape-", dir="/run")
    except OSError as exc:
        shutil.rmtree(base)
        pytest.skip(f"cannot create a socket directory under /run here ({exc.strerror})")
    try:
        yield {
            "base": str(base),
            "workspace": str(base / "ws"),
            "outside_dir": str(base / "out"),
            "run_dir": run_dir,
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("mode", MODES)
async def test_escapes_fail_for_the_suite_user(
    places: dict[str, str], mode: str, network: str
) -> None:
    report = await run_escapes(
        mode, network, places["workspace"], places["run_dir"], places["outside_dir"]
    )
    _check(report, network)


def _unprivileged_python() -> tuple[list[str], dict[str, str]] | str:
    """The command prefix and environment to run Python as uid 65534, or why not."""
    if os.geteuid() != 0:
        return "the suite does not run as root, so it cannot switch to a throwaway uid"
    if shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed"
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HOME": "/"}
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/python{version}"):
        check = subprocess.run(
            [*prefix, python, "-c", "import dsh_terminal_core, dsh_terminal_bash, psutil"],
            env=env,
            capture_output=True,
            timeout=60,
            check=False,
        )
        if check.returncode == 0:
            return [*prefix, python], env
    return f"uid {NOBODY} cannot run this suite's Python with its packages"


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("mode", MODES)
def test_escapes_fail_for_an_unprivileged_user(
    places: dict[str, str], mode: str, network: str
) -> None:
    how = _unprivileged_python()
    if isinstance(how, str):
        pytest.skip(how)
    command, env = how
    for path in (places["base"], places["workspace"], places["outside_dir"], places["run_dir"]):
        os.chown(path, NOBODY, NOBODY)
    args = {key: places[key] for key in ("workspace", "run_dir", "outside_dir")}
    args.update(mode=mode, network=network)
    done = subprocess.run(
        [*command, str(DRIVER), json.dumps(args)],
        cwd=places["base"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if "does not work here" in done.stderr or "SANDBOX_UNAVAILABLE" in done.stderr:
        pytest.skip(f"bwrap does not work for uid {NOBODY} here: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr[-2000:]
    _check(json.loads(done.stdout.strip().splitlines()[-1]), network)


# -- the owner's private /tmp -----------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_each_owner_has_its_own_tmp_removed_when_it_is_disposed(
    tmp_path: Path, mode: str
) -> None:
    config = {"sandbox-policy": {"mode": mode, "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        first, second = h.create_agent("first"), h.create_agent("second")

        async def open_(agent: Any) -> Any:
            opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            sid = opened.value["sessionId"]

            async def run(command: str) -> str:
                result = await h.call_tool(
                    agent, "terminal_send", {"sessionId": sid, "text": command}
                )
                assert result.value["waitReason"] == "stdin_read", result.text
                return str(result.value["viewport"])

            return run

        first_a, first_b, second_a = await asyncio.gather(open_(first), open_(first), open_(second))
        assert await first_a("test ! -e /tmp/mine && echo from-first > /tmp/mine; echo $?") == "0\n"
        assert (
            await second_a("test ! -e /tmp/mine && echo from-second > /tmp/mine; echo $?") == "0\n"
        )
        # One owner's shells share its /tmp; the other owner's is a different directory.
        assert await first_b("cat /tmp/mine") == "from-first\n"
        assert await second_a("cat /tmp/mine") == "from-second\n"
        first_dir = h.ctx.sandbox_policy.resolve(first).tmp_dir
        second_dir = h.ctx.sandbox_policy.resolve(second).tmp_dir
        assert first_dir != second_dir
        assert Path(first_dir, "mine").read_text() == "from-first\n"
        assert Path(second_dir, "mine").read_text() == "from-second\n"
        assert os.stat(first_dir).st_mode & 0o777 == 0o700

        await first.dispose()
        assert not os.path.exists(first_dir)
        assert await second_a("cat /tmp/mine") == "from-second\n"
        await second.dispose()
        assert not os.path.exists(second_dir)


async def test_harness_shutdown_removes_every_private_tmp(tmp_path: Path) -> None:
    config = {"sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]
        await h.call_tool(
            agent,
            "terminal_send",
            {
                "sessionId": sid,
                "text": "mkdir -p /tmp/a/b && touch /tmp/a/b/c && chmod 500 /tmp/a/b",
            },
        )
        private = h.ctx.sandbox_policy.resolve(agent).tmp_dir
        assert os.path.isfile(os.path.join(private, "a", "b", "c"))
    assert not os.path.exists(private)


async def test_private_tmp_never_outlives_an_owner_disposed_mid_spawn(tmp_path: Path) -> None:
    """Disposal racing a spawn, at every point of the spawn: the owner's /tmp is gone
    once dispose returns, and a shell that still started never kept it alive."""
    config = {"sandbox-policy": {"mode": "workspace-write", "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        for yields in range(50):
            agent = h.create_agent(f"racer-{yields}")
            private = h.ctx.sandbox_policy.resolve(agent).tmp_dir
            opening = asyncio.ensure_future(h.call_tool(agent, "terminal_open", {"type": "shell"}))
            for _ in range(yields):
                await asyncio.sleep(0)
            await agent.dispose()
            result = await opening
            assert result.is_error or result.value["sessionId"]
            assert not os.path.exists(private), yields
            assert h.ctx.terminals.list(agent) == []
