"""Faults from outside the stack: killed shells, stubborn children, daemons, a dying host.

Everything runs on real PTYs with the production timing defaults; each test proves what
it leaves behind (the suite's autouse leak check runs after every test as well).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from dsh_terminal_bash import BashConfig
from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import ReadRequest, SendRequest, WaitReason

from ..helpers import full_access
from ._support import (
    BWRAP_USABLE,
    alive,
    ignored_signals,
    kill_now,
    reaping,
    tree,
    unique_seconds,
    until,
    wait_gone,
    with_argv,
)

GRACE_S = BashConfig().dispose_grace_ms / 1000
MARGIN_S = 2.0


def _stubborn(ignore: tuple[str, ...], tag: str) -> str:
    """A python foreground child that ignores ``ignore`` and sleeps; ``tag`` names it."""
    body = "; ".join(f"signal.signal(signal.{name}, signal.SIG_IGN)" for name in ignore)
    return f'python3 -c "import signal,time; {body}; time.sleep({tag})"'


def _pythons(found: list[psutil.Process]) -> int:
    """How many of ``found`` run python, or -1 while anything else (a launcher) is there."""
    try:
        names = [proc.name() for proc in found]
    except psutil.Error:
        return -1
    return len(names) if all(name.startswith("python") for name in names) else -1


async def _open(h: Harness, agent: Agent) -> tuple[str, int]:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
    assert not opened.is_error, opened.text
    return opened.value["sessionId"], opened.value["pid"]


async def test_shell_killed_from_outside_during_a_send_settles_session_exit() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        dead, pid = await _open(h, agent)
        tag = unique_seconds()
        send = asyncio.ensure_future(
            h.call_tool(agent, "terminal_send", {"sessionId": dead, "text": f"sleep {tag}"})
        )
        await until(lambda: bool(with_argv(f"sleep {tag}")), what="the foreground sleep")
        sleeper = with_argv(f"sleep {tag}")
        os.kill(pid, signal.SIGKILL)

        result = await asyncio.wait_for(send, 10)
        assert not result.is_error, result.text
        assert result.value["waitReason"] == "session_exit"
        assert result.value["sessionStatus"] == {
            "kind": "exited",
            "exitCode": None,
            "signal": "SIGKILL",
        }
        assert result.value["exitCode"] is None
        assert "killed by SIGKILL" in result.text
        # With its session leader gone the kernel hung up the foreground group: the sleep
        # went with its shell.
        assert wait_gone(sleeper, 5) == []

        # The registry is still usable: the dead session is listed, another opens and works.
        listed = (await h.call_tool(agent, "terminal_list", {})).value["sessions"]
        assert [(s["sessionId"], s["status"]["kind"]) for s in listed] == [(dead, "exited")]
        live, _ = await _open(h, agent)
        echoed = await h.call_tool(
            agent, "terminal_send", {"sessionId": live, "text": "echo still-here"}
        )
        assert (echoed.value["waitReason"], echoed.value["viewport"]) == (
            "stdin_read",
            "still-here\n",
        )
        listed = (await h.call_tool(agent, "terminal_list", {})).value["sessions"]
        assert [s["sessionId"] for s in listed] == [dead, live]

        # The dead session answers every operation with a stable outcome, never a hang.
        again = await h.call_tool(agent, "terminal_send", {"sessionId": dead, "text": "echo x"})
        assert again.text.startswith("error [SESSION_EXITED]"), again.text
        refused = await h.call_tool(
            agent, "terminal_signal", {"sessionId": dead, "signal": "SIGINT"}
        )
        assert refused.text.startswith("error [SESSION_EXITED]")
        page = await h.call_tool(agent, "terminal_read", {"sessionId": dead})
        assert f"sleep {tag}" in page.value["text"]

        closed = await h.call_tool(agent, "terminal_close", {"sessionId": dead})
        assert closed.value == {"closed": True}
        listed = (await h.call_tool(agent, "terminal_list", {})).value["sessions"]
        assert [s["sessionId"] for s in listed] == [live]
        assert (await h.call_tool(agent, "terminal_close", {"sessionId": live})).value == {
            "closed": True
        }


@pytest.mark.parametrize(
    ("ignore", "slowest"),
    [
        # SIGHUP still ends it: closing a terminal is a hangup, no grace to wait out.
        (("SIGTERM", "SIGINT"), MARGIN_S),
        # Nothing polite works: SIGKILL after the grace.
        (("SIGTERM", "SIGINT", "SIGHUP"), GRACE_S + MARGIN_S),
    ],
    ids=["term-int", "term-int-hup"],
)
async def test_close_ends_a_foreground_child_that_ignores_polite_signals(
    ignore: tuple[str, ...], slowest: float
) -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid, _ = await _open(h, agent)
        tag = unique_seconds()
        with reaping(tag):
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=_stubborn(ignore, tag)))
            # A launcher in front of python3 (a version manager's shim) carries the tag
            # too until it has exec'd python itself; wait for the python process alone.
            await until(lambda: _pythons(with_argv(tag)) == 1, what="the stubborn child")
            [child] = with_argv(tag)
            wanted = {signal.Signals[name].value for name in ignore}
            await until(lambda: wanted <= ignored_signals(child.pid), what="its handlers")
            interrupted = await h.call_tool(
                agent, "terminal_signal", {"sessionId": sid, "signal": "SIGINT"}
            )
            assert interrupted.value["delivered"] is True
            await asyncio.sleep(0.1)
            assert alive(child), "the child was supposed to ignore SIGINT"

            started = time.monotonic()
            closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            elapsed = time.monotonic() - started
            assert closed.value == {"closed": True}
            assert elapsed < slowest, f"close took {elapsed:.2f}s"
            assert not alive(child)
            print(f"\nFIGURE close ignoring {'+'.join(ignore)}: {elapsed:.3f}s")
            result = await asyncio.wait_for(op.done, 1)
            assert result.wait_reason is WaitReason.SESSION_EXIT


async def test_child_forked_during_teardown_is_swept(tmp_path: Path) -> None:
    """A foreground program answers SIGTERM by forking a HUP/TERM-ignoring child into its
    own process group, then exits: the close still ends that child."""
    record = tmp_path / "forked.pid"
    tag = unique_seconds()
    program = textwrap.dedent(
        f"""
        import os, signal, sys, time
        def on_term(*_):
            pid = os.fork()
            if pid == 0:
                os.setpgid(0, 0)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                time.sleep({tag})
                os._exit(0)
            with open({str(record)!r}, "w") as out:
                out.write(str(pid))
            os._exit(0)
        signal.signal(signal.SIGTERM, on_term)
        signal.signal(signal.SIGHUP, on_term)
        print("armed", flush=True)
        time.sleep({tag})
        """
    )
    script = tmp_path / "forker.py"
    script.write_text(program)
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid, _ = await _open(h, agent)
        with reaping(tag):
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text=f"python3 {script}"))
            await until(lambda: _armed(h, agent, sid), what="the SIGTERM handler")
            closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            assert closed.value == {"closed": True}
            assert record.exists(), "the program never saw SIGTERM"
            forked = int(record.read_text())
            assert not psutil.pid_exists(forked) or not alive(psutil.Process(forked))
            assert with_argv(tag) == []
            assert (await op.done).wait_reason is WaitReason.SESSION_EXIT


def _armed(h: Harness, agent: Agent, sid: str) -> bool:
    return "armed" in h.ctx.terminals.read(agent, sid, ReadRequest()).text


async def test_double_forked_job_left_in_the_pty_session_is_killed() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid, pid = await _open(h, agent)
        tag = unique_seconds()
        with reaping(tag):
            started = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": f"(sleep {tag} &)"}
            )
            assert started.value["waitReason"] == "stdin_read"
            await until(lambda: bool(with_argv(f"sleep {tag}")))
            [daemon] = with_argv(f"sleep {tag}")
            # Reparented away from the shell, so not a descendant any more — but still in
            # the PTY's POSIX session, which teardown scans.
            assert daemon.pid not in {c.pid for c in psutil.Process(pid).children(recursive=True)}
            assert os.getsid(daemon.pid) == os.getsid(pid)
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            assert not alive(daemon)


async def test_setsid_daemon_that_left_the_session_is_ended_without_cgroups() -> None:
    """Without cgroups, a process that called setsid() after leaving the shell's tree is
    out of reach of the session scan and the descendant walk; it is orphaned to the fork
    server (a child subreaper) and carries the terminal's ``DSH_TERMINAL_TAG``, so close
    ends it. What remains a gap without cgroups (a daemon that cleared its environment)
    is asserted in tests/reliability/test_owner_limits.py."""
    async with Harness(config=full_access(**{"owner-limits": {"cgroups": "off"}})) as h:
        agent = h.create_agent("a")
        sid, pid = await _open(h, agent)
        tag = unique_seconds()
        with reaping(tag):
            await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": f"(setsid sleep {tag} &)"}
            )
            await until(lambda: bool(with_argv(f"sleep {tag}")))
            [daemon] = with_argv(f"sleep {tag}")
            assert os.getsid(daemon.pid) == daemon.pid != os.getsid(pid)
            closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            assert closed.value == {"closed": True}
            assert not alive(daemon), "a tagged setsid daemon outlived close without cgroups"


async def test_close_racing_an_active_send_and_a_second_close() -> None:
    async with Harness(config=full_access()) as h:
        agent = h.create_agent("a")
        sid, pid = await _open(h, agent)
        tag = unique_seconds()
        send = asyncio.ensure_future(
            h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": f"sleep {tag}"})
        )
        await until(lambda: bool(with_argv(f"sleep {tag}")))
        members = tree(pid)
        first, second = await asyncio.gather(
            h.call_tool(agent, "terminal_close", {"sessionId": sid}),
            h.call_tool(agent, "terminal_close", {"sessionId": sid}),
        )
        assert sorted([first.value["closed"], second.value["closed"]]) == [False, True]
        result = await asyncio.wait_for(send, 5)
        assert result.value is not None, result.text
        assert result.value["waitReason"] == "session_exit"
        assert result.value["sessionStatus"]["kind"] == "exited"
        assert (await h.call_tool(agent, "terminal_list", {})).value == {"sessions": []}
        assert [p for p in members if alive(p)] == []
        late = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert late.text.startswith("error [NO_SESSION]")


# Output keeps a send from settling on silence, and its uneven beat (0.2 s, then 0.7 s)
# from settling as a periodic redrawer (SPEC §28.3): the send stays in flight.
TICK = "(while :; do echo tick; sleep 0.2; echo tick; sleep 0.7; done) & "


async def test_harness_shutdown_with_work_in_flight_everywhere_leaves_nothing() -> None:
    """Leaving ``async with Harness`` ends every agent's sessions concurrently: foreground
    sends, background jobs, pty sessions and a child that ignores every polite signal."""
    stubborn_tag, job_tag = unique_seconds(), unique_seconds()
    stubborn = (
        'python3 -c "import signal,time; '
        "[signal.signal(s, signal.SIG_IGN) "
        "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)]; "
        "[print('tick', flush=True) or time.sleep(0.2 + 0.5 * (n % 2)) "
        f"for n in range(10**9)]\" {stubborn_tag}"
    )
    repl_loop = (
        "exec(\"import time\\nwhile True:\\n print('tick', flush=True); time.sleep(0.2)"
        "\\n print('tick', flush=True); time.sleep(0.7)\")"
    )
    with reaping(stubborn_tag), reaping(job_tag):
        h = Harness(config=full_access())
        await h.start()
        pending: list[asyncio.Future[Any]] = []
        victims: list[psutil.Process] = []
        agents = []
        try:
            for n in range(3):
                agent = h.create_agent(f"agent-{n}")
                agents.append(agent)
                fg, _ = await _open(h, agent)
                op = h.ctx.terminals.start_send(
                    agent, fg, SendRequest(text=f"{TICK}sleep {job_tag}")
                )
                pending.append(op.done)
                bg, _ = await _open(h, agent)
                started = await h.call_tool(
                    agent, "terminal_send",
                    {"sessionId": bg, "text": f"{TICK}sleep {job_tag}", "run_in_background": True},
                )  # fmt: skip
                assert started.value["kind"] == "background"
                repl = await h.ctx.pty.open(agent, {"command": "python3 -q -i"})
                pending.append(
                    asyncio.ensure_future(
                        h.ctx.pty.send(agent, repl.session_id, {"data": repl_loop})
                    )
                )
            last, _ = await _open(h, agent)
            pending.append(h.ctx.terminals.start_send(agent, last, SendRequest(text=stubborn)).done)
            await until(
                lambda: len(with_argv(f"sleep {job_tag}")) == 6 and bool(with_argv(stubborn_tag))
            )
            await until(
                lambda: signal.SIGHUP.value in ignored_signals(with_argv(stubborn_tag)[0].pid)
            )
            for owner in agents:
                for snap in h.ctx.terminals.list(owner):
                    victims += tree(snap.pid)
            assert not any(fut.done() for fut in pending)
        finally:
            started_at = time.monotonic()
            await h.aclose()
            elapsed = time.monotonic() - started_at
        assert elapsed < GRACE_S + MARGIN_S, f"shutdown took {elapsed:.2f}s"
        print(f"\nFIGURE shutdown: {len(victims)} processes, 10 sessions, ended in {elapsed:.2f}s")
        for outcome in await asyncio.wait_for(asyncio.gather(*pending), 1):
            status = getattr(outcome, "session_status", None) or outcome.status
            assert status.kind == "exited", outcome
        assert len(victims) >= 3 * 3 + 2
        assert [p for p in victims if alive(p)] == []
        assert with_argv(job_tag) == [] and with_argv(stubborn_tag) == []


# -- the host process dies with sessions open ---------------------------------------------

HOST = textwrap.dedent(
    """
    import asyncio, json, sys
    from dsh_terminal_core.harness import Harness
    from dsh_terminal_core.terminals import SendRequest, SpawnRequest

    async def main(mode, workspace, workload):
        config = {"sandbox-policy": {"mode": mode, "workspace_root": workspace}}
        async with Harness(config=config) as h:
            agent = h.create_agent("host")
            pids = []
            for command in workload:
                opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
                pids.append(opened.pid)
                if command.startswith("fg:"):
                    request = SendRequest(text=command[3:])
                    h.ctx.terminals.start_send(agent, opened.session_id, request)
                elif command:
                    await h.ctx.terminals.start_send(
                        agent, opened.session_id, SendRequest(text=command)
                    ).done
            repl = await h.ctx.pty.open(agent, {"command": "python3 -q -i"})
            pids.append(repl.pid)
            print(json.dumps(pids), flush=True)
            await asyncio.Event().wait()

    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
    """
)


def _host_dies(
    tmp_path: Path,
    mode: str,
    workload: list[str],
    sig: signal.Signals,
    tags: list[str],
    patience: float = 5.0,
) -> list[str]:
    """Run a host with ``workload`` sessions and kill it with ``sig``.

    Returns a description of every session process still running ``patience`` seconds
    later, and kills those itself, so a failing run leaves nothing behind either.
    """
    script = tmp_path / "host.py"
    script.write_text(HOST)
    host = subprocess.Popen(
        [sys.executable, str(script), mode, str(tmp_path), json.dumps(workload)],
        stdout=subprocess.PIPE,
        text=True,
    )
    victims: dict[int, psutil.Process] = {}
    try:
        assert host.stdout is not None
        line = host.stdout.readline()
        assert line, f"the host failed to start (exit {host.wait(10)})"
        pty_pids = json.loads(line)
        deadline = time.monotonic() + 10
        while not all(with_argv(tag) for tag in tags) and time.monotonic() < deadline:
            time.sleep(0.02)
        for pid in pty_pids:
            for proc in tree(pid):
                victims[proc.pid] = proc
        for tag in tags:
            for proc in with_argv(tag):
                victims[proc.pid] = proc
        shells = [p for p in victims.values() if p.name() == "bash"]
        assert len(shells) == len(pty_pids), "every session's shell was found"
        host.send_signal(sig)
        assert host.wait(10) == -sig
        survivors = wait_gone(victims.values(), patience)
        print(f"\nFIGURE host {sig.name} in {mode}: {len(victims)} session processes watched")
        return [f"{p.pid} {' '.join(p.cmdline())}" for p in survivors if alive(p)]
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(10)
        if host.stdout is not None:
            host.stdout.close()
        kill_now(victims.values())


MODES = ["danger-full-access"] + (["workspace-write"] if BWRAP_USABLE else [])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("mode", MODES)
def test_host_killed_by_a_signal_leaves_no_shell(
    tmp_path: Path, mode: str, sig: signal.Signals
) -> None:
    """No atexit hook runs when the host dies by a signal. The kernel hangs up the PTY when
    its master closes: the session leader gets SIGHUP (unconfined: bash, which passes it on
    to its jobs; confined: bwrap, whose --die-with-parent SIGKILLs bash), the foreground
    group gets SIGHUP when the leader exits, and an idle shell that ignores SIGHUP reads
    EOF and exits. The provider's host-death guardian kills what is left of each session."""
    fg, bg = unique_seconds(), unique_seconds()
    workload = [
        "",  # idle at its prompt
        f"fg:sleep {fg}",  # a foreground command still running
        "trap '' HUP",  # a shell that ignores the hangup signal, idle at its prompt
    ]
    tags = [f"sleep {fg}"]
    if mode == "danger-full-access":
        workload.append(f"sleep {bg} &")  # a background job: bash hangs it up on its way out
        tags.append(f"sleep {bg}")
    with reaping(fg), reaping(bg):
        survivors = _host_dies(tmp_path, mode, workload, sig, tags)
        assert survivors == [], f"outlived the host: {survivors}"


# What the kernel's hangup alone does not reach; the provider's host-death guardian does.
BEYOND_THE_HANGUP = [
    pytest.param("danger-full-access", "fg:{stubborn}", id="sighup-ignoring-foreground-child"),
    pytest.param(
        "workspace-write",
        "sleep {tag} &",
        id="background-job-of-a-confined-shell",
        marks=pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap is not usable here"),
    ),
]


@pytest.mark.parametrize(("mode", "command"), BEYOND_THE_HANGUP)
def test_host_killed_by_a_signal_leaves_no_descendant(
    tmp_path: Path, mode: str, command: str
) -> None:
    tag = unique_seconds()
    stubborn = _stubborn(("SIGHUP", "SIGTERM"), tag)
    with reaping(tag):
        survivors = _host_dies(
            tmp_path, mode, [command.format(stubborn=stubborn, tag=tag)], signal.SIGTERM, [tag], 2.0
        )
        assert survivors == [], f"outlived the host: {survivors}"
