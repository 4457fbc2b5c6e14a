"""A host killed outright (SIGKILL: no exit hook runs) leaves no process of its terminals.

The guardian the provider starts at the first spawn sees its pipe close when the host
dies and kills every process still in a recorded terminal session: background jobs,
``nohup`` children and programs that ignore SIGHUP included, confined or not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

HOST = textwrap.dedent(
    """
    import asyncio, sys
    from dsh_terminal_core.harness import Harness

    async def main():
        config = {"sandbox-policy": {"mode": sys.argv[1], "workspace_root": sys.argv[2]}}
        async with Harness(config=config) as h:
            agent = h.create_agent("doomed-host")
            sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
            tag = sys.argv[3]
            await h.call_tool(agent, "terminal_send", {"sessionId": sid,
                "text": f"nohup sleep {tag}1 >/dev/null 2>&1 & sleep {tag}2 &"})
            await h.call_tool(agent, "terminal_send", {"sessionId": sid, "run_in_background": True,
                "text": "python3 -c 'import signal,time; "
                    f"signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep({tag}3)'"})
            print("ready", flush=True)
            await asyncio.sleep(120)

    asyncio.run(main())
    """
)

MODES = [
    pytest.param("danger-full-access", id="unconfined"),
    pytest.param(
        "workspace-write",
        id="bwrap",
        marks=pytest.mark.skipif(
            not BwrapSandbox(BwrapConfig()).available(), reason="bubblewrap is not usable"
        ),
    ),
]


def _tagged(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if (
            tag in cmdline
            and proc.info["status"] != psutil.STATUS_ZOMBIE
            and "dsh_terminal_core" not in cmdline
        ):
            found.append(proc)
    return found


def _workload_names(tag: str) -> list[str]:
    """The executables of the processes carrying ``tag``, sorted."""
    names = []
    for proc in _tagged(tag):
        with contextlib.suppress(OSError):
            names.append(_executable(proc.pid))
    return sorted(names)


def _executable(pid: int) -> str:
    # Read now: psutil remembers a process's executable from its first look, which
    # may have been taken before the exec.
    return os.path.basename(os.readlink(f"/proc/{pid}/exe"))


def _workloads_started(names: list[str]) -> bool:
    """Both sleeps and the Python interpreter run, and nothing else carries the tag.

    ``python3`` may be a launcher (a version manager's shell-script shim) that runs a
    few processes of its own, with the same arguments, before the interpreter starts.
    """
    return len(names) == 3 and names.count("sleep") == 2 and names[0].startswith("python")


@pytest.mark.parametrize("mode", MODES)
def test_sigkilled_host_leaves_no_terminal_process(tmp_path: Path, mode: str) -> None:
    # Seconds of sleep that also name the workloads; the fraction keeps the tag from
    # matching any other command line (a bare "768" is inside "32768").
    seed = os.getpid() + time.monotonic_ns()
    tag = f"{700 + seed % 200}.{seed // 200 % 10**6:06d}"
    with subprocess.Popen(
        [sys.executable, "-c", HOST, mode, str(tmp_path), tag],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as host:
        _kill_host_and_check(host, tag)


def _kill_host_and_check(host: subprocess.Popen[str], tag: str) -> None:
    try:
        assert host.stdout is not None
        assert host.stdout.readline().strip() == "ready", host.stderr.read() if host.stderr else ""
        deadline = time.monotonic() + 5
        while not _workloads_started(_workload_names(tag)) and time.monotonic() < deadline:
            time.sleep(0.05)
        names = _workload_names(tag)
        assert _workloads_started(names), f"the three workloads should be running: {names}"
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        deadline = time.monotonic() + 5
        while _tagged(tag) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivors = _tagged(tag)
        for proc in survivors:
            proc.kill()
        assert survivors == [], f"outlived the host: {[p.cmdline() for p in survivors]}"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
