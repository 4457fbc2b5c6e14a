"""The teardown's fallback without cgroups (SPEC §29.3), with real processes.

With ``owner-limits.cgroups = "off"`` (as on a host or in a container that gives no
cgroup access, and in every world, which loads no owner limits) nothing but the process
tree marks a terminal's processes. What leaves the tree — a ``setsid`` daemon that
ignores HUP and TERM, a double fork — is orphaned to the fork server (a child
subreaper), and closing the terminal kills every adopted process carrying its tag
(``DSH_TERMINAL_TAG``), with its subtree. Another terminal's orphans are not touched,
the adopted ones are reaped (no zombie stays below the server), and in a world whose
agent is PID 1 of its pid namespace the same holds.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import psutil
import pytest

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider.forkclient import fork_server
from dsh_terminal_core.provider.strays import TAG_VARIABLE
from dsh_terminal_core.registry import SendRequest, SpawnRequest

from ..helpers import full_access
from ..worlds.world_fixture import needs_namespaces, world_config
from ._support import alive, unique_seconds, until, with_argv

OFF = {"owner-limits": {"cgroups": "off"}}

_IGNORING = (
    "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep({tag})"
)


def _daemons(tag: str, twice: str) -> str:
    """A ``setsid`` daemon ignoring HUP and TERM, and a double fork that does the same."""
    daemon, double = _IGNORING.format(tag=tag), _IGNORING.format(tag=twice)
    return (
        f"setsid python3 -c '{daemon}' </dev/null >/dev/null 2>&1 & "
        f"( (setsid python3 -c '{double}' </dev/null >/dev/null 2>&1 &) & ); true"
    )


async def _open(h: Harness, agent: Agent) -> tuple[str, int]:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"]), int(opened.value["pid"])


async def _send(h: Harness, agent: Agent, sid: str, text: str, **extra: Any) -> Any:
    result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": text, **extra})
    assert not result.is_error, result.text
    return result.value


def _server_children() -> list[psutil.Process]:
    pid = fork_server().pid
    assert pid is not None
    return psutil.Process(pid).children()


def _tag_of(pid: int) -> str:
    return psutil.Process(pid).environ()[TAG_VARIABLE]


async def test_setsid_and_double_forked_daemons_die_at_close_without_cgroups() -> None:
    tag, twice = unique_seconds(), unique_seconds()
    async with Harness(config=full_access(**OFF)) as h:
        agent = h.create_agent("a")
        sid, shell = await _open(h, agent)
        await _send(h, agent, sid, _daemons(tag, twice))
        await until(lambda: bool(with_argv(tag)) and bool(with_argv(twice)), what="daemons")
        daemons = with_argv(tag) + with_argv(twice)
        assert len(daemons) == 2
        # Both are out of the shell's session and tree: the tree walk cannot find them.
        for proc in daemons:
            assert os.getsid(proc.pid) != os.getsid(shell)
            assert _tag_of(proc.pid) == _tag_of(shell)
        # The double fork's grandchild was orphaned at once: adopted by the fork server,
        # not by init.
        (double,) = with_argv(twice)
        assert double.ppid() == fork_server().pid
        closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert not closed.is_error, closed.text
        assert [p.pid for p in daemons if alive(p)] == []
        # The server reaped what it adopted: no zombie is left below it.
        await until(
            lambda: not [p for p in _server_children() if p.status() == psutil.STATUS_ZOMBIE],
            what="the adopted daemons reaped",
        )


async def test_another_terminals_orphans_are_not_touched() -> None:
    mine, theirs = unique_seconds(), unique_seconds()
    async with Harness(config=full_access(**OFF)) as h:
        agent, other = h.create_agent("a"), h.create_agent("b")
        (sid, _), (other_sid, _) = await asyncio.gather(_open(h, agent), _open(h, other))
        # Both orphaned to the fork server at once (double forks).
        await _send(h, agent, sid, f"( (setsid sleep {mine} </dev/null >/dev/null 2>&1 &) & )")
        await _send(
            h, other, other_sid, f"( (setsid sleep {theirs} </dev/null >/dev/null 2>&1 &) & )"
        )
        await until(lambda: bool(with_argv(mine)) and bool(with_argv(theirs)), what="sleeps")
        (kept,) = with_argv(theirs)
        assert kept.ppid() == fork_server().pid
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert not with_argv(mine)
        assert alive(kept)
        await h.call_tool(other, "terminal_close", {"sessionId": other_sid})
        assert not alive(kept)


async def test_an_orphans_subtree_goes_with_it_even_without_the_tag() -> None:
    """A daemon that starts a child with a cleared environment: the child, below a tagged
    process, is the session's all the same."""
    tag, bare = unique_seconds(), unique_seconds()
    script = (
        f"import os, time; os.setsid(); os.spawnv(os.P_NOWAIT, '/usr/bin/env', "
        f"['env', '-i', '/bin/sleep', '{bare}']); time.sleep({tag})"
    )
    async with Harness(config=full_access(**OFF)) as h:
        agent = h.create_agent("a")
        sid, shell = await _open(h, agent)
        await _send(h, agent, sid, f"( (python3 -c \"{script}\" </dev/null >/dev/null 2>&1 &) & )")
        def bare_sleep() -> list[psutil.Process]:
            return [p for p in with_argv(bare) if p.cmdline() == ["/bin/sleep", bare]]

        await until(lambda: bool(bare_sleep()), what="the daemon's child")
        (child,) = bare_sleep()
        assert TAG_VARIABLE not in child.environ()
        assert _tag_of(child.ppid()) == _tag_of(shell)
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert not alive(child) and not with_argv(tag)


async def test_many_orphans_at_once_all_die_at_close() -> None:
    """Fifty double forks, each orphaned to the server: a bounded stand-in for a fork
    bomb's strays, which without cgroups no limit would bound."""
    tag = unique_seconds()
    async with Harness(config=full_access(**OFF)) as h:
        agent = h.create_agent("a")
        sid, _ = await _open(h, agent)
        await _send(
            h, agent, sid,
            f"for i in $(seq 50); do ( (setsid sleep {tag} </dev/null >/dev/null 2>&1 &) & ); done",
        )  # fmt: skip
        await until(lambda: len(with_argv(tag)) == 50, what="fifty orphans")
        closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert not closed.is_error, closed.text
        assert not with_argv(tag)


@needs_namespaces
@pytest.mark.bwrap
async def test_a_worlds_orphans_die_at_close_where_the_agent_is_pid_1() -> None:
    """The world agent is PID 1 of its pid namespace: without the subreaper its shells'
    orphans would be its own children for good."""
    tag, twice = unique_seconds(), unique_seconds()
    async with Harness(config=world_config()) as h:
        agent = h.create_agent("agent-1")
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell", world="ns"))
        await h.ctx.terminals.start_send(
            agent, opened.session_id, SendRequest(text=_daemons(tag, twice))
        ).done
        await until(lambda: bool(with_argv(tag)) and bool(with_argv(twice)), what="daemons")
        daemons = with_argv(tag) + with_argv(twice)
        await h.ctx.terminals.kill(agent, opened.session_id, "closed by the test")
        assert [p.pid for p in daemons if alive(p)] == []
        await agent.dispose()
