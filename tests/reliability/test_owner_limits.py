"""Limits per owner through cgroups (SPEC §29.3), with real processes.

* A ``setsid`` daemon that ignores HUP and TERM, a double-forked one, and one started
  with its environment cleared (``env -i``), are gone once ``terminal_close`` returns —
  unconfined, where the process tree cannot find them — with the session's cgroup
  emptied by ``cgroup.kill`` and by the v1 freezer; with the cgroups off the fallback
  (orphans adopted by the fork server, found by their tag, ``test_orphan_teardown.py``)
  ends the first two, and the one without the tag survives (the test can fail).
* A fork bomb and a memory hog in one owner's shells, run together inside an outer
  safety cgroup of the test's own: another owner's 20 concurrent sends all settle with
  their own output and exit code, the runaway owner is told which limit was enforced,
  the harness stays up, and nothing is left running or in the cgroup trees.
* The runaway sessions are held to ``runaway_cpu_percent`` % of one CPU and the notice
  says so; the other owner's sessions are not. A session that filled its owner's process
  limit is released once it calmed down, and a bystander whose one fork was refused
  beside it is never capped. An owner below its limits has none of its sessions'
  counters read.
* A host that gives no cgroup access (cgroupfs mounted read-only, as in a container):
  explicit limits fail the open with ``LIMITS_UNAVAILABLE`` naming what is missing;
  the defaults are skipped with a warning.
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from typing import Any

import psutil
import pytest

from dsh_terminal_core.kernel.agents import Agent, Notice
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider.cgroupfs import discover, read_text
from dsh_terminal_core.provider.cgroups import CgroupGroup, LimitCounts
from dsh_terminal_core.sandbox.limitwatch import CALM_S

from ..helpers import full_access, own_descendants
from ._cgroups import cgroup_reason, harness_dirs, outer_limit
from ._support import alive, unique_seconds, until, with_argv

pytestmark = pytest.mark.skipif(cgroup_reason() is not None, reason=str(cgroup_reason()))

_DAEMON = (
    "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep({tag})"
)


def _daemons(tag: str, twice: str, bare: str) -> str:
    """A ``setsid`` daemon ignoring HUP and TERM, a double fork that does the same, and
    a double fork whose environment was cleared (it carries no terminal's tag)."""
    daemon = _DAEMON.format(tag=tag)
    double = _DAEMON.format(tag=twice)
    cleared = _DAEMON.format(tag=bare)
    return (
        f"setsid python3 -c '{daemon}' </dev/null >/dev/null 2>&1 & "
        f"( (setsid python3 -c '{double}' </dev/null >/dev/null 2>&1 &) & ); "
        f"( (setsid env -i $(command -v python3) -c '{cleared}' </dev/null >/dev/null 2>&1 &) & )"
        "; true"
    )


async def _open(h: Harness, agent: Agent) -> str:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
    assert not opened.is_error, opened.text
    return str(opened.value["sessionId"])


async def _send(h: Harness, agent: Agent, sid: str, text: str, **extra: Any) -> Any:
    result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": text, **extra})
    assert not result.is_error, result.text
    return result.value


@pytest.mark.parametrize("kill_with", ["cgroup.kill", "freezer"])
async def test_setsid_and_double_forked_daemons_are_gone_after_close(kill_with: str) -> None:
    host = discover()
    if kill_with == "cgroup.kill" and host.unified is None:
        pytest.skip("cgroup v2 is not mounted here")
    if kill_with == "freezer" and "freezer" not in host.legacy:
        pytest.skip("the cgroup v1 freezer is not mounted here")
    tags = unique_seconds(), unique_seconds(), unique_seconds()
    async with Harness(config=full_access(**{"owner-limits": {"kill_with": kill_with}})) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid, shell_session = opened.value["sessionId"], os.getsid(opened.value["pid"])
        await _send(h, agent, sid, _daemons(*tags))
        await until(lambda: all(with_argv(tag) for tag in tags), what="daemons")
        daemons = [proc for tag in tags for proc in with_argv(tag)]
        assert len(daemons) == 3
        for proc in daemons:
            assert os.getsid(proc.pid) != shell_session  # out of the terminal's session
        closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        assert not closed.is_error, closed.text
        assert [p.pid for p in daemons if alive(p)] == []
    assert harness_dirs() == []


async def test_without_cgroups_only_the_daemon_without_the_tag_outlives_close() -> None:
    """The gap the cgroup closes, shown on the same daemons: the fallback without cgroups
    ends the tagged two; the one whose environment was cleared survives, so the test
    above can fail."""
    tags = unique_seconds(), unique_seconds(), unique_seconds()
    try:
        async with Harness(config=full_access(**{"owner-limits": {"cgroups": "off"}})) as h:
            agent = h.create_agent("a")
            sid = await _open(h, agent)
            await _send(h, agent, sid, _daemons(*tags))
            await until(lambda: all(with_argv(tag) for tag in tags), what="daemons")
            await h.call_tool(agent, "terminal_close", {"sessionId": sid})
            assert [tag for tag in tags if any(alive(p) for p in with_argv(tag))] == [tags[2]]
    finally:
        for proc in [proc for tag in tags for proc in with_argv(tag)]:
            proc.kill()
            proc.wait(5)


async def test_confined_session_lands_in_its_cgroup_and_leaves_nothing() -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    config = {"sandbox-policy": {"mode": "workspace-write"}, "owner-limits": {"pids_max": 64}}
    async with Harness(config=config) as h:
        agent = h.create_agent("a")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]
        value = await _send(h, agent, sid, "cat /proc/self/cgroup; echo $$")
        assert "pids:/\n" in value["viewport"]  # its own cgroup namespace: the root
        shell = int(value["viewport"].split()[-1])
        assert shell != opened.value["pid"]  # the shell inside, not bubblewrap
        # Seen from the host, bubblewrap and the shell are both in the session's cgroup.
        for pid in (opened.value["pid"], *[p.pid for p in psutil.Process(opened.value["pid"]).children(recursive=True)]):
            assert f"pids:/dsh-{os.getpid()}-" in read_text(f"/proc/{pid}/cgroup")
            assert f"/o1-a/{sid}\n" in read_text(f"/proc/{pid}/cgroup")
        plan = h.ctx.owner_limits.plan()
        pids_dir = os.path.join(plan.bases[discover().serving("pids").mount], "o1-a")
        assert read_text(os.path.join(pids_dir, "pids.max")).strip() == "64"
        await h.call_tool(agent, "terminal_close", {"sessionId": sid})
        # Empty at once; the directory itself goes off the close's path, in a moment.
        assert not read_text(os.path.join(pids_dir, sid, "cgroup.procs"))
        await until(lambda: not os.path.exists(os.path.join(pids_dir, sid)), timeout=5,
                    what="the session's cgroup removed")
    assert harness_dirs() == []


# -- a runaway owner beside a quiet one ------------------------------------------------

_BOMB = "bomb() { bomb | bomb & }; bomb"
_HOG = (
    "while :; do python3 -c 'a = []\nwhile True: a.append(bytearray(32 << 20))' "
    ">/dev/null 2>&1; done"
)


async def _concurrent_sends(h: Harness, agent: Agent, sids: list[str], round_: int) -> None:
    async def one(i: int, sid: str) -> None:
        token = f"tok-{round_}-{i}"
        value = await _send(h, agent, sid, f"echo {token}; (exit {i % 7})", timeoutMs=60000)
        assert value["waitReason"] == "stdin_read", value
        assert value["exitCode"] == i % 7, value
        assert token in value["viewport"], value

    await asyncio.gather(*(one(i, sid) for i, sid in enumerate(sids)))


async def test_fork_bomb_and_memory_hog_leave_another_owner_working() -> None:
    with outer_limit(memory=3 << 30, pids=1500) as outer:
        limits = {"memory_max": "512M", "pids_max": 400, "parent": outer}
        sections = {"owner-limits": limits, "terminals": {"max_sessions_per_owner": 20}}
        async with Harness(config=full_access(**sections)) as h:
            runaway, quiet = h.create_agent("runaway"), h.create_agent("quiet")
            told: list[Notice] = []
            runaway.on_notice(told.append)
            sids = list(await asyncio.gather(*(_open(h, quiet) for _ in range(20))))
            await _concurrent_sends(h, quiet, sids, 0)
            bomb_sid, hog_sid = await _open(h, runaway), await _open(h, runaway)
            plan = h.ctx.owner_limits.plan()
            pids_mount = discover().serving("pids").mount
            (owner_pids,) = glob.glob(os.path.join(plan.bases[pids_mount], "o*-runaway"))
            await _send(h, runaway, hog_sid, _HOG, timeoutMs=500)
            await _send(h, runaway, bomb_sid, _BOMB, timeoutMs=500)
            try:
                await until(lambda: {n.data["limit"] for n in told} >= {"memory", "pids"},
                            timeout=60, what="both limits enforced and reported")
            except AssertionError as exc:
                state = {
                    os.path.join(root, name): read_text(os.path.join(root, name))
                    for root in [owner_pids, *glob.glob(os.path.join(owner_pids, "*/"))]
                    for name in ("pids.current", "pids.events")
                }
                raise AssertionError(f"{exc}; told {told}; {state}") from exc
            for round_ in range(1, 4):
                await _concurrent_sends(h, quiet, sids, round_)
                assert int(read_text(os.path.join(owner_pids, "pids.current")) or "x") <= 400
            # What the model sees: the queued notices, which the MCP server adds to the
            # owner's next result as "[notice] ..." lines and its "notices" list.
            queued = " ".join(n.text for n in runaway.drain_notices())
            assert "at its owner's memory limit" in queued, queued
            assert "at its owner's process limit" in queued, queued
            texts = " ".join(n.text for n in told)
            assert "memory limit (512 MiB)" in texts and "process limit (400" in texts
            assert {n.data["sessionId"] for n in told} == {bomb_sid, hog_sid}
            # Both runaways are held to 10% of one CPU; the quiet owner's shells are not.
            assert "held to 10% of one CPU" in texts
            assert {_cpu_cap(h, "runaway", sid) for sid in (bomb_sid, hog_sid)} == {10}
            assert {_cpu_cap(h, "quiet", sid) for sid in sids} == {None}
            # The runaway owner can still end it all: close empties both cgroups.
            for sid in (bomb_sid, hog_sid):
                closed = await h.call_tool(runaway, "terminal_close", {"sessionId": sid})
                assert not closed.is_error, closed.text
            assert not [
                word for root, _, _ in os.walk(owner_pids)
                for word in (read_text(os.path.join(root, "cgroup.procs")) or "").split()
            ]
            # The last killed ones are uncharged once init has reaped them.
            await until(lambda: read_text(os.path.join(owner_pids, "pids.current")) == "0\n",
                        timeout=10, what="the runaway owner's process count back to 0")
            await _concurrent_sends(h, quiet, sids, 9)
        assert harness_dirs(outer) == []
    assert not with_argv("bytearray(32 << 20)")


def _kill(procs: list[psutil.Process]) -> None:
    """Kill from outside: a shell whose owner is full is itself stuck retrying a fork."""
    for proc in procs:
        proc.kill()
    psutil.wait_procs(procs, timeout=10)


def _cpu_cap(h: Harness, owner: str, sid: str) -> int | None:
    """The CPU cap of ``owner``'s session ``sid`` in percent of one CPU (None: uncapped)."""
    tree = discover().serving("cpu")
    assert tree is not None
    (owner_dir,) = glob.glob(os.path.join(h.ctx.owner_limits.plan().bases[tree.mount], f"o*-{owner}"))
    directory = os.path.join(owner_dir, sid)
    if tree.version == 2:
        quota, period = read_text(os.path.join(directory, "cpu.max")).split()
    else:
        quota = read_text(os.path.join(directory, "cpu.cfs_quota_us")).strip()
        period = read_text(os.path.join(directory, "cpu.cfs_period_us")).strip()
    return None if quota in ("max", "-1") else int(quota) * 100 // int(period)


async def test_a_session_that_filled_the_process_limit_is_capped_then_released() -> None:
    limits = {"pids_max": 64, "watch_interval_ms": 100}
    async with Harness(config=full_access(**{"owner-limits": limits})) as h:
        agent = h.create_agent("a")
        told: list[Notice] = []
        agent.on_notice(told.append)
        filler, bystander = await _open(h, agent), await _open(h, agent)
        # Sixty sleeps fill the owner's 64; the bystander's command then needs a fork.
        tag = unique_seconds()
        await _send(h, agent, filler, f"for i in $(seq 70); do sleep {tag} & done 2>/dev/null; true")
        await _send(h, agent, bystander, "/bin/true", timeoutMs=5000)
        await until(lambda: {n.data["sessionId"] for n in told} >= {filler, bystander},
                    timeout=10, what="both sessions told of refused forks")
        by_session = {n.data["sessionId"]: n for n in told}
        assert by_session[filler].data["cpuCapPercent"] == 10
        assert "held to 10% of one CPU" in by_session[filler].text
        # The bystander held a process or two: its refused fork is no runaway's.
        assert by_session[bystander].data["cpuCapPercent"] is None
        assert (_cpu_cap(h, "a", filler), _cpu_cap(h, "a", bystander)) == (10, None)
        # Still full: not released, however long it has been. (Each look ahead in time
        # follows a look now, which takes in every trip so far at its real time.)
        service = h.ctx.owner_limits
        service.check_counters()
        service._watched.check(now=time.monotonic() + CALM_S + 1)
        assert _cpu_cap(h, "a", filler) == 10
        _kill(with_argv(tag))  # the way out: terminal_signal, or anything from outside
        # Calm for CALM_S and holding little: released.
        service.check_counters()
        service._watched.check(now=time.monotonic() + CALM_S / 2)
        assert _cpu_cap(h, "a", filler) == 10
        service._watched.check(now=time.monotonic() + CALM_S + 1)
        assert _cpu_cap(h, "a", filler) is None
        value = await _send(h, agent, filler, "echo $((6 * 7))")
        assert "42" in value["viewport"]


async def test_an_owner_below_its_limits_has_no_session_counters_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read: list[str] = []
    counts = CgroupGroup.counts

    def counting(group: CgroupGroup) -> LimitCounts:
        read.append(group.dirs[0])
        return counts(group)

    limits = {"pids_max": 64, "watch_interval_ms": 60000}
    async with Harness(config=full_access(**{"owner-limits": limits})) as h:
        calm, full = h.create_agent("calm"), h.create_agent("full")
        calm_sids = [await _open(h, calm) for _ in range(3)]
        full_sid = await _open(h, full)
        tag = unique_seconds()
        await _send(h, full, full_sid, f"for i in $(seq 70); do sleep {tag} & done 2>/dev/null; true")
        monkeypatch.setattr(CgroupGroup, "counts", counting)
        h.ctx.owner_limits.check_counters()
        assert [os.path.basename(d) for d in read] == [full_sid]
        assert not any(sid in d for d in read for sid in calm_sids)
        _kill(with_argv(tag))


# -- a host without cgroup access --------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from dsh_terminal_core.kernel.harness import Harness

    async def main():
        limits = json.loads(sys.argv[1])
        config = {"sandbox-policy": {"mode": "danger-full-access"}, "owner-limits": limits}
        async with Harness(config=config) as h:
            agent = h.create_agent("a")
            opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            print(json.dumps({"error": opened.is_error, "text": opened.text}))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    ("limits", "refused", "named"),
    [
        ({"memory_max": "1G"}, True, "memory"),
        ({"cgroups": "require"}, True, "Read-only file system"),
        ({}, False, ""),
    ],
)
def test_no_cgroup_access_refuses_explicit_limits_and_skips_defaults(
    limits: dict[str, Any], refused: bool, named: str
) -> None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        pytest.skip("bubblewrap is not installed (it mounts the cgroups read-only here)")
    done = subprocess.run(
        [bwrap, "--dev-bind", "/", "/", "--ro-bind", "/sys/fs/cgroup", "/sys/fs/cgroup",
         "--die-with-parent", sys.executable, "-c", _CHILD, json.dumps(limits)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["error"] is refused, answer
    if refused:
        assert "LIMITS_UNAVAILABLE" in answer["text"] and named in answer["text"], answer
        assert "Read-only file system" in answer["text"]
    else:
        assert "owner limits: the host does not allow" in done.stderr
    assert not [p for p in own_descendants() if alive(p)]
