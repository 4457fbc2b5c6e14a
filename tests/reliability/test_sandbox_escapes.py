"""Escapes from a confined shell fail: host processes, host /tmp and /run sockets, the
host's loopback services, socket variables, capabilities, ``/proc/<pid>/root``.

Each attempt is made from inside a shell opened and driven through the real tools
(``escape_driver``), in both confined modes, with ``network`` none and host, as the
user running the suite and — when the suite runs as root and the machine allows it — as
an unprivileged throwaway uid. What ``network = "host"`` adds is the host's network and
nothing else: its TCP service on 127.0.0.1 and its abstract unix socket.
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

from dsh_terminal_core.kernel.harness import Harness

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
    "connect to a host abstract unix socket",
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
    # The host's network is the host's: its loopback services and its abstract sockets.
    shared = {
        "connect to a host TCP service on 127.0.0.1",
        "connect to a host abstract unix socket",
    }
    allowed = shared if network == "host" else set()
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


# Run as root, prints the non-standard-library modules a harness loads and the metadata
# directories that name its plugins: what a throwaway uid needs readable.
_INVENTORY = """
import asyncio, importlib.metadata as md, json, sys, sysconfig
from dsh_terminal_core.harness import Harness

async def main():
    async with Harness(config={"sandbox-policy": {"mode": "danger-full-access"}}):
        pass

asyncio.run(main())
stdlib = sysconfig.get_paths()["stdlib"]
modules = sorted(
    m.__file__ for n, m in list(sys.modules.items())
    if "." not in n and getattr(m, "__file__", None) and not m.__file__.startswith(stdlib)
)
metadata = sorted({str(ep.dist._path) for ep in md.entry_points(group="dsh.plugins")})
print(json.dumps({"modules": modules, "metadata": metadata}))
"""


def _runs_as_nobody(command: list[str], env: dict[str, str]) -> bool:
    check = subprocess.run(
        [*command, "-c", "import dsh_terminal_core.harness, dsh_terminal_bash, psutil"],
        env=env,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return check.returncode == 0


def _stage(staging: Path) -> None:
    """Copy what the harness imports (and its plugin metadata) where any uid can read it."""
    inventory = subprocess.run(
        [sys.executable, "-c", _INVENTORY], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(inventory.stdout.strip().splitlines()[-1])
    for origin in found["modules"]:
        source = Path(origin)
        if source.name == "__init__.py":
            shutil.copytree(source.parent, staging / source.parent.name, dirs_exist_ok=True)
        else:
            shutil.copy2(source, staging / source.name)
    for metadata in found["metadata"]:
        shutil.copytree(metadata, staging / Path(metadata).name, dirs_exist_ok=True)
    for path in (staging, *staging.rglob("*")):
        path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))


@pytest.fixture(scope="module")
def unprivileged_python() -> Iterator[tuple[list[str], dict[str, str]] | str]:
    """The command and environment that run this suite's Python as uid 65534, or why not.

    The suite's own interpreter and packages are used when that uid can read them; when
    they live somewhere private (an interpreter under /root), the system's interpreter of
    the same version runs a world-readable copy of exactly what the harness imports.
    """
    if os.geteuid() != 0:
        yield "the suite does not run as root, so it cannot switch to a throwaway uid"
        return
    if shutil.which("setpriv") is None:
        yield "setpriv (util-linux) is not installed"
        return
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HOME": "/"}
    if _runs_as_nobody([*prefix, sys.executable], env):
        yield [*prefix, sys.executable], env
        return
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(f"python{version}", path="/usr/local/bin:/usr/bin:/bin")
    if system is None:
        yield f"no interpreter that uid {NOBODY} can run (python{version} in /usr/bin)"
        return
    staging = Path(tempfile.mkdtemp(prefix="dsh-escape-python-", dir="/var/tmp"))
    try:
        _stage(staging)
        env["PYTHONPATH"] = str(staging)
        if _runs_as_nobody([*prefix, system], env):
            yield [*prefix, system], env
        else:
            yield f"uid {NOBODY} cannot import the harness even from a readable copy"
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@pytest.mark.parametrize("network", NETWORKS)
@pytest.mark.parametrize("mode", MODES)
def test_escapes_fail_for_an_unprivileged_user(
    places: dict[str, str],
    mode: str,
    network: str,
    unprivileged_python: tuple[list[str], dict[str, str]] | str,
) -> None:
    how = unprivileged_python
    if isinstance(how, str):
        pytest.skip(how)
    command, env = how
    driver = Path(places["base"], DRIVER.name)  # readable wherever the suite lives
    shutil.copy(DRIVER, driver)
    for path in (places["base"], places["workspace"], places["outside_dir"], places["run_dir"]):
        os.chown(path, NOBODY, NOBODY)
    args = {key: places[key] for key in ("workspace", "run_dir", "outside_dir")}
    args.update(mode=mode, network=network)
    done = subprocess.run(
        [*command, str(driver), json.dumps(args)],
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


_DOOMED_HOST = """
import asyncio, sys
from dsh_terminal_core.harness import Harness

async def main():
    policy = {"mode": "workspace-write", "workspace_root": sys.argv[1]}
    async with Harness(config={"sandbox-policy": policy}) as h:
        agent = h.create_agent("doomed")
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo x > /tmp/left"})
        print(h.ctx.sandbox_policy.resolve(agent).tmp_dir, flush=True)
        await asyncio.sleep(120)

asyncio.run(main())
"""


async def test_a_killed_hosts_private_tmp_is_removed_by_the_next_harness(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _DOOMED_HOST, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as host:
        assert host.stdout is not None
        left = (await asyncio.to_thread(host.stdout.readline)).strip()
        assert Path(left, "left").read_text() == "x\n"
        host.kill()  # no dispose effect runs
        await asyncio.to_thread(host.wait, 30)
    assert os.path.isdir(left)
    config = {"sandbox-policy": {"mode": "read-only", "workspace_root": str(tmp_path)}}
    async with Harness(config=config) as h:
        h.ctx.sandbox_policy.resolve(h.create_agent("next"))
        assert not os.path.exists(left)
