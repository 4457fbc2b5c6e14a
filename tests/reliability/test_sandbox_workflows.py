"""A confined shell is still a developer's shell: job control, the exact stdin probe,
password prompts and signals work across its pid namespace, and compilers, git, python
and (with ``network = "host"``) the resolver configuration are there."""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest

from ._support import BWRAP_USABLE

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap is not usable here"),
]

Run = Callable[[str], Awaitable[dict[str, Any]]]


def _nspid(pid: int) -> list[int]:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("NSpid:"))
    return [int(n) for n in line.split()[1:]]


@asynccontextmanager
async def confined_shell(
    workspace: Path, mode: str, network: str = "none"
) -> AsyncIterator[tuple[Harness, Any, str, Run]]:
    policy = {"mode": mode, "workspace_root": str(workspace), "network": network}
    async with Harness(config={"sandbox-policy": policy}) as h:
        agent = h.create_agent("dev")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        assert not opened.is_error, opened.text
        sid = opened.value["sessionId"]

        async def run(command: str) -> dict[str, Any]:
            result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": command})
            return result.value  # type: ignore[no-any-return]

        yield h, agent, sid, run


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_job_control_and_the_exact_probe_work_across_the_pid_namespace(
    tmp_path: Path, mode: str
) -> None:
    async with confined_shell(tmp_path, mode) as (h, agent, sid, run):
        shell_pid = h.ctx.terminals.get_session(agent, sid).shell_pid
        # The harness knows the shell by its host pid; the shell lives one namespace down.
        host_pid, inner_pid = _nspid(shell_pid)
        assert host_pid == shell_pid and inner_pid < 10
        assert (await run("echo $$"))["viewport"] == f"{inner_pid}\n"

        # A foreground program (not the shell) blocked reading the terminal: only the
        # exact probe, reading the host's /proc, can settle this as stdin_read.
        reading = await run("cat")
        assert reading["waitReason"] == "stdin_read", reading
        ended = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": "\x04", "submit": False}
        )
        assert ended.value["waitReason"] == "stdin_read", ended.value
        after = await run("echo back")
        assert (after["waitReason"], after["viewport"]) == ("stdin_read", "back\n")

        # Stop a foreground job from the terminal, resume it in the background, bring it
        # back, interrupt it: tcsetpgrp and the learned shell group hold across namespaces.
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="sleep 300"))
        await _until(lambda: _foreground_is(shell_pid, "sleep"))
        stopped = await h.call_tool(
            agent, "terminal_signal", {"sessionId": sid, "signal": "SIGTSTP"}
        )
        pgid = stopped.value["targetPgid"]
        assert pgid != shell_pid and psutil.Process(pgid).name() == "sleep"
        assert len(_nspid(pgid)) == 2  # a host pid of a process inside the namespace
        result = await op.done
        assert str(result.wait_reason) == "stdin_read" and "Stopped" in result.viewport
        assert "Running" in (await run("bg %1; jobs"))["viewport"]
        op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="fg %1"))
        await _until(lambda: _foreground_is(shell_pid, "sleep"))
        await h.call_tool(agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
        result = await op.done
        assert str(result.wait_reason) == "stdin_read" and result.exit_code == 130
        assert (await run("jobs; echo none-left"))["viewport"] == "none-left\n"

        # getpass opens /dev/tty and reads it with echo off: a hidden-input wait.
        prompt = await run(
            "python3 -c \"import getpass; print(len(getpass.getpass('Password: ')))\""
        )
        assert (prompt["waitReason"], prompt["inputHidden"]) == ("stdin_read", True)
        answered = await run("hunter2")
        assert answered["viewport"].strip().endswith("7") and answered["exitCode"] == 0


def _foreground_is(shell_pid: int, name: str) -> bool:
    """True when the terminal's foreground group (tpgid, as the host's /proc reports it
    for the shell) is led by a process called ``name``."""
    with open(f"/proc/{shell_pid}/stat") as stat:
        tpgid = int(stat.read().rsplit(")", 1)[1].split()[5])
    try:
        return bool(psutil.Process(tpgid).name() == name)
    except psutil.Error:
        return False


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_developer_tools_work_in_the_workspace(tmp_path: Path) -> None:
    async with confined_shell(tmp_path, "workspace-write") as (_h, _agent, _sid, run):
        built = await run(
            "printf '#include <stdio.h>\\nint main(void){puts(\"built\");return 0;}\\n' > hi.c"
            " && cc -o hi hi.c && ./hi"
        )
        assert (built["exitCode"], built["viewport"]) == (0, "built\n"), built
        assert (tmp_path / "hi").is_file()
        committed = await run(
            "git init -q repo && cd repo && echo a > a && git add a && "
            "git -c user.name=t -c user.email=t@e commit -qm first && git log --format=%s && cd .."
        )
        assert (committed["exitCode"], committed["viewport"]) == (0, "first\n"), committed
        scratch = await run("python3 -c 'import tempfile; print(tempfile.mkstemp()[1][:5])'")
        assert scratch["viewport"] == "/tmp/\n"


@pytest.mark.skipif(not os.path.isfile("/etc/resolv.conf"), reason="no resolver configuration")
@pytest.mark.parametrize("network", ["none", "host"])
async def test_resolver_and_certificates_are_readable(tmp_path: Path, network: str) -> None:
    certificates = next(
        (p for p in ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
         if os.path.isfile(p)),
        None,
    )  # fmt: skip
    async with confined_shell(tmp_path, "read-only", network) as (_h, _agent, _sid, run):
        resolv = await run("cat /etc/resolv.conf > /dev/null && echo readable")
        assert resolv["viewport"] == "readable\n"
        if certificates is not None:
            certs = await run(f"grep -c 'BEGIN CERTIFICATE' {certificates}")
            assert int(certs["viewport"]) > 0
        # /proc/net belongs to the reader's network namespace (/sys is the host's view).
        listing = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"
        interfaces = await run(listing)
        with open("/proc/net/dev") as dev:
            names = sorted(line.split(":")[0].strip() for line in dev.readlines()[2:])
        host_interfaces = " ".join(names) + " "
        if network == "host":
            assert interfaces["viewport"] == host_interfaces
        else:
            assert interfaces["viewport"] == "lo "


@pytest.mark.skipif(os.geteuid() != 0, reason="the capability comparison needs root")
async def test_danger_full_access_is_unconfined_and_says_so(tmp_path: Path) -> None:
    policy = {"mode": "danger-full-access", "workspace_root": str(tmp_path)}
    async with Harness(config={"sandbox-policy": policy}) as h:
        agent = h.create_agent("a")
        assert h.ctx.sandbox_policy.resolve(agent).confined is False
        sid = (await h.call_tool(agent, "terminal_open", {"type": "shell"})).value["sessionId"]
        shown = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": f"test -e /proc/{os.getpid()} && echo host-visible"},
        )
        assert shown.value["viewport"] == "host-visible\n"


@pytest.mark.parametrize("mode", ["read-only", "workspace-write"])
async def test_closing_a_confined_session_ends_a_daemon_that_left_it(
    tmp_path: Path, mode: str
) -> None:
    """``setsid`` takes a process out of the terminal's POSIX session, where teardown
    cannot find it; the sandbox's pid namespace still ends it with the shell."""
    tag = f"{1000 + os.getpid() % 1000}.{time.monotonic_ns() % 10**6:06d}"
    async with confined_shell(tmp_path, mode) as (h, agent, sid, run):
        started = await run(f"setsid sleep {tag} < /dev/null > /dev/null 2>&1 & echo started")
        # ``setsid`` forks and its job ends at once: bash may report it before the prompt.
        lines = [
            line
            for line in started["viewport"].split("\n")
            if line and not re.match(r"\[\d+\][+-]? +Done", line)
        ]
        assert lines[-1:] == ["started"], started["viewport"]
        await _until(lambda: bool(_sleepers(tag)))
        [daemon] = _sleepers(tag)
        assert os.getsid(daemon.pid) != os.getsid(h.ctx.terminals.get_session(agent, sid).shell_pid)
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        await _until(lambda: not _sleepers(tag))


def _sleepers(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["cmdline"] == ["sleep", tag] and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found
