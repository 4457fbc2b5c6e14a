"""Teardown races a real OS cannot stage on demand, on an injected process table."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

import pytest

from dsh_terminal_core.kernel.errors import TerminalError
from dsh_terminal_core.provider import (
    LocalTerminalProvider,
    ProcessIdentity,
    ProcessInfo,
    ProcessTable,
    PsutilProcessTable,
    TerminalSpawnSpec,
    TreeReaper,
    default_process_table,
)

ROOT = ProcessIdentity(100, 1.0)
SESSION = 100
GRACE = 0.2
Behaviour = Callable[[int], None]


class FakeTable:
    """A process table whose rows the test edits; signals act through behaviours."""

    def __init__(self) -> None:
        self.rows: dict[int, ProcessInfo] = {}
        self.delivered: list[tuple[ProcessIdentity, int]] = []
        self.behaviours: dict[ProcessIdentity, Behaviour] = {}
        self.ignoring_term: set[int] = set()

    def add(
        self, pid: int, *, ppid: int, sid: int = SESSION, create_time: float | None = None
    ) -> ProcessIdentity:
        row = ProcessInfo(
            pid=pid,
            ppid=ppid,
            sid=sid,
            create_time=create_time if create_time is not None else float(pid),
            zombie=False,
        )
        self.rows[pid] = row
        return row.identity

    def remove(self, pid: int) -> None:
        self.rows.pop(pid, None)

    def zombify(self, pid: int) -> None:
        row = self.rows[pid]
        self.rows[pid] = ProcessInfo(
            pid=row.pid, ppid=row.ppid, sid=row.sid, create_time=row.create_time, zombie=True
        )

    def snapshot(self) -> Sequence[ProcessInfo]:
        return list(self.rows.values())

    def lookup(self, pid: int) -> ProcessInfo | None:
        return self.rows.get(pid)

    def send_signal(self, identity: ProcessIdentity, signum: int) -> bool:
        row = self.rows.get(identity.pid)
        if row is None or row.create_time != identity.create_time:
            return False
        self.delivered.append((identity, signum))
        behaviour = self.behaviours.get(identity)
        if behaviour is not None:
            behaviour(signum)
        elif signum in (signal.SIGTERM, signal.SIGKILL):
            self.remove(identity.pid)
        return True

    def ignores(self, identity: ProcessIdentity, signum: int) -> bool | None:
        row = self.rows.get(identity.pid)
        alive = row is not None and row.create_time == identity.create_time
        return alive and signum == signal.SIGTERM and identity.pid in self.ignoring_term

    def signals_to(self, identity: ProcessIdentity) -> list[int]:
        return [signum for target, signum in self.delivered if target == identity]


class FakeShell:
    """The PTY child: leaves on HUP/TERM unless stubborn, always on KILL.

    ``deaf_for`` polite signals are lost first, like bash's SIGHUP during its startup.
    """

    def __init__(
        self, table: FakeTable, *, exited: bool = False, stubborn: bool = False, deaf_for: int = 0
    ) -> None:
        self._table = table
        self.exited = exited
        self.stubborn = stubborn
        self.deaf_for = deaf_for
        self.signals: list[int] = []

    def signal_shell(self, signum: int) -> None:
        if self.exited:
            return  # like the real one: a no-op once reaped
        self.signals.append(signum)
        if signum != signal.SIGKILL and (self.stubborn or self.deaf_for > 0):
            self.deaf_for -= 1
            return
        self.exited = True
        self._table.remove(ROOT.pid)

    async def wait_exit(self, timeout: float) -> bool:
        if not self.exited:
            await asyncio.sleep(timeout)
        return self.exited


def staged() -> tuple[FakeTable, TreeReaper]:
    table = FakeTable()
    table.add(ROOT.pid, ppid=1, sid=SESSION, create_time=ROOT.create_time)
    return table, TreeReaper(table, ROOT, SESSION)


async def test_a_clean_tree_is_ended_with_term_without_waiting_the_grace() -> None:
    table, reaper = staged()
    child = table.add(101, ppid=ROOT.pid)
    grandchild = table.add(102, ppid=101)
    orphan_in_session = table.add(103, ppid=1)  # double-forked job, same session
    stranger = table.add(104, ppid=1, sid=999)
    started = time.monotonic()
    await reaper.teardown(FakeShell(table), grace=5.0)
    assert time.monotonic() - started < 1.0
    for member in (child, grandchild, orphan_in_session):
        assert table.signals_to(member)[0] == signal.SIGTERM
        assert signal.SIGKILL not in table.signals_to(member)
    assert table.signals_to(stranger) == []


async def test_the_fence_stops_adoption_once_the_root_pid_is_reused() -> None:
    table, reaper = staged()
    member = table.add(101, ppid=ROOT.pid)
    table.behaviours[member] = lambda sig: None  # survives TERM until KILL below
    assert reaper.capture() == [member]

    # The root is reaped and its pid reused by a stranger leading its own session
    # with the same number, with a child of its own.
    table.remove(ROOT.pid)
    stranger = table.add(ROOT.pid, ppid=1, sid=ROOT.pid, create_time=50.0)
    strangers_child = table.add(105, ppid=ROOT.pid, sid=ROOT.pid)
    assert reaper.capture() == []
    assert not reaper.fence_open

    table.behaviours[member] = lambda sig: table.remove(101) if sig == signal.SIGKILL else None
    await reaper.teardown(FakeShell(table, exited=True), grace=GRACE)
    assert table.signals_to(stranger) == []
    assert table.signals_to(strangers_child) == []
    assert table.signals_to(member)[-1] == signal.SIGKILL


async def test_a_captured_pid_taken_by_another_process_is_never_signalled() -> None:
    table, reaper = staged()
    original = table.add(101, ppid=ROOT.pid)
    assert reaper.capture() == [original]
    table.remove(101)
    newcomer = table.add(101, ppid=1, sid=999, create_time=77.0)
    await reaper.teardown(FakeShell(table), grace=GRACE)
    assert table.signals_to(newcomer) == []
    assert reaper.live() == []


async def test_zombies_count_as_gone() -> None:
    table, reaper = staged()
    member = table.add(101, ppid=ROOT.pid)
    # Exits on TERM but its parent never reaps it: a zombie forever.
    table.behaviours[member] = lambda sig: table.zombify(101)
    table.add(102, ppid=ROOT.pid)
    table.zombify(102)  # already a zombie: never adopted
    started = time.monotonic()
    await reaper.teardown(FakeShell(table), grace=5.0)
    assert time.monotonic() - started < 1.0
    assert table.signals_to(member) == [signal.SIGTERM, signal.SIGCONT]
    assert all(identity.pid != 102 for identity in reaper.captured)


async def test_a_child_forked_while_handling_term_is_swept() -> None:
    table, reaper = staged()
    worker = table.add(101, ppid=ROOT.pid)
    forked: list[ProcessIdentity] = []

    def on_signal(sig: int) -> None:
        if sig == signal.SIGTERM:
            # Fork a TERM-proof helper, then exit: the helper is reparented to init,
            # so only the rescan of the session can find it.
            helper = table.add(150, ppid=1)
            table.behaviours[helper] = lambda s: table.remove(150) if s == signal.SIGKILL else None
            forked.append(helper)
            table.remove(101)

    table.behaviours[worker] = on_signal
    await reaper.teardown(FakeShell(table), grace=GRACE)
    assert forked and forked[0] in reaper.captured
    assert table.signals_to(forked[0]) == [signal.SIGKILL]
    assert 150 not in table.rows


async def test_children_of_captured_processes_are_adopted_after_the_fence_closes() -> None:
    table, reaper = staged()
    worker = table.add(101, ppid=ROOT.pid)
    assert reaper.capture() == [worker]
    table.remove(ROOT.pid)  # the shell is gone: no more adoption by root or session
    reaper.close_fence()
    forked: list[ProcessIdentity] = []

    def on_signal(sig: int) -> None:
        if sig == signal.SIGTERM and not forked:
            forked.append(table.add(160, ppid=101, sid=160))  # forks, ignores TERM
        elif sig == signal.SIGKILL:
            table.remove(101)

    table.behaviours[worker] = on_signal
    await reaper.teardown(FakeShell(table, exited=True), grace=GRACE)
    assert forked[0] in reaper.captured
    assert table.signals_to(forked[0]) == [signal.SIGKILL]
    assert 160 not in table.rows


async def test_a_survivor_fails_teardown_and_is_named() -> None:
    table, reaper = staged()
    immortal = table.add(101, ppid=ROOT.pid)
    table.behaviours[immortal] = lambda sig: None
    with pytest.raises(TerminalError) as caught:
        await reaper.teardown(FakeShell(table), grace=0.05)
    assert caught.value.code == "TEARDOWN_FAILED"
    assert "101" in str(caught.value)
    # Once it is finally gone, a retry succeeds.
    table.remove(101)
    await reaper.teardown(FakeShell(table, exited=True), grace=0.05)


async def test_hup_goes_only_to_processes_that_ignore_term() -> None:
    table, reaper = staged()
    handles_term = table.add(101, ppid=ROOT.pid)
    nested_shell = table.add(102, ppid=ROOT.pid)
    table.ignoring_term.add(102)
    table.behaviours[nested_shell] = lambda sig: table.remove(102) if sig == signal.SIGHUP else None
    started = time.monotonic()
    await reaper.teardown(FakeShell(table), grace=5.0)
    assert time.monotonic() - started < 1.0
    assert table.signals_to(handles_term) == [signal.SIGTERM]  # gone before CONT
    assert table.signals_to(nested_shell) == [signal.SIGTERM, signal.SIGHUP]


async def test_a_stubborn_shell_is_asked_politely_then_killed() -> None:
    table, reaper = staged()
    table.ignoring_term.add(ROOT.pid)  # an interactive shell
    shell = FakeShell(table, stubborn=True)
    started = time.monotonic()
    await reaper.teardown(shell, grace=0.2)
    assert 0.2 <= time.monotonic() - started < 1.0
    assert shell.signals[:2] == [signal.SIGTERM, signal.SIGHUP]
    assert shell.signals[-1] == signal.SIGKILL
    assert set(shell.signals[:-1]) == {signal.SIGHUP, signal.SIGTERM}


async def test_a_shell_that_handles_term_never_gets_hup() -> None:
    table, reaper = staged()
    shell = FakeShell(table)
    await reaper.teardown(shell, grace=1.0)
    assert shell.signals == [signal.SIGTERM]


async def test_a_lost_polite_signal_is_repeated_before_resorting_to_kill() -> None:
    table, reaper = staged()
    table.ignoring_term.add(ROOT.pid)
    shell = FakeShell(table, deaf_for=2)  # the first TERM and HUP are lost
    started = time.monotonic()
    await reaper.teardown(shell, grace=3.0)
    assert time.monotonic() - started < 0.5
    assert signal.SIGKILL not in shell.signals
    assert shell.signals == [signal.SIGTERM, signal.SIGHUP, signal.SIGTERM]


@pytest.mark.parametrize("table", [PsutilProcessTable(), default_process_table()])
def test_the_real_tables_refuse_a_stale_identity(table: ProcessTable) -> None:
    child = subprocess.Popen(["sleep", "100"])
    try:
        row = table.lookup(child.pid)
        assert row is not None and not row.zombie
        assert row.sid == os.getsid(0) and row.ppid == os.getpid()
        assert any(r.identity == row.identity for r in table.snapshot())
        stale = ProcessIdentity(child.pid, row.create_time - 10)
        assert not table.send_signal(stale, signal.SIGTERM)
        assert child.poll() is None
        assert table.send_signal(row.identity, signal.SIGTERM)
        # Not yet reaped: a zombie still holds the pid and counts as gone.
        deadline = time.monotonic() + 5
        while not (zombie := table.lookup(child.pid)) or not zombie.zombie:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert child.wait(5) == -signal.SIGTERM
        assert not table.send_signal(row.identity, signal.SIGTERM)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


class StagedTable(PsutilProcessTable):
    """The real table plus one phantom member of a given session that ignores signals."""

    PHANTOM = 9_000_001  # above any pid_max: never a real pid

    def __init__(self) -> None:
        self.session: int | None = None
        self.alive = True

    def _phantom(self) -> ProcessInfo | None:
        if self.session is None or not self.alive:
            return None
        return ProcessInfo(
            pid=self.PHANTOM, ppid=1, sid=self.session, create_time=1.0, zombie=False
        )

    def snapshot(self) -> Sequence[ProcessInfo]:
        rows = list(super().snapshot())
        phantom = self._phantom()
        return [*rows, phantom] if phantom is not None else rows

    def lookup(self, pid: int) -> ProcessInfo | None:
        if pid == self.PHANTOM:
            return self._phantom()
        return super().lookup(pid)

    def send_signal(self, identity: ProcessIdentity, signum: int) -> bool:
        if identity.pid == self.PHANTOM:
            return self.alive
        return super().send_signal(identity, signum)

    def ignores(self, identity: ProcessIdentity, signum: int) -> bool | None:
        return None if identity.pid == self.PHANTOM else super().ignores(identity, signum)


async def test_failed_terminate_keeps_retrying_and_shares_runs() -> None:
    table = StagedTable()
    provider = LocalTerminalProvider(process_table=table)
    process = await provider.spawn_terminal(
        TerminalSpawnSpec(argv=["/bin/bash", "--noprofile", "--norc", "-i"], grace_ms=50)
    )
    table.session = process.pid
    try:
        first, second = await asyncio.gather(
            process.terminate(), process.terminate(), return_exceptions=True
        )
        assert isinstance(first, TerminalError) and first.code == "TEARDOWN_FAILED"
        assert first is second  # one run, shared
        assert str(StagedTable.PHANTOM) in str(first)
        assert process.done.done()  # the shell itself was reaped and its PTY closed
        table.alive = False
        await process.terminate()
        await process.terminate()  # after success: returns at once
    finally:
        table.alive = False
        await process.terminate()
