"""A capture after one that adopted nothing reads only the processes that appeared since
(the close of an idle shell), and still finds every one that belongs; a wrapped pid
counter or an earlier adoption means a full scan again."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import attrs
import pytest

from dsh_terminal_core.provider import ProcessIdentity, ProcessInfo, ProcfsProcessTable, TreeReaper
from dsh_terminal_core.provider.process_table import ScanMark

from .test_provider_teardown_staged import ROOT, SESSION, FakeTable


class MarkedFakeTable(FakeTable):
    """The fake table with a pid counter: new rows take the next pid unless told one."""

    def __init__(self) -> None:
        super().__init__()
        self.newest = 0
        self.wrapped = False  # the pid counter came back around since the last mark
        self.full_scans = 0
        self.follow_ups = 0

    def add(
        self, pid: int, *, ppid: int, sid: int = SESSION, create_time: float | None = None
    ) -> ProcessIdentity:
        self.newest = max(self.newest, pid)
        return super().add(pid, ppid=ppid, sid=sid, create_time=create_time)

    def marked_snapshot(self) -> tuple[Sequence[ProcessInfo], ScanMark | None]:
        self.full_scans += 1
        self.wrapped = False
        return self.snapshot(), ScanMark(newest=self.newest, forks=0, listed=frozenset(self.rows))

    def appeared_since(self, mark: ScanMark) -> Sequence[ProcessInfo] | None:
        if self.wrapped:
            return None
        self.follow_ups += 1
        return [row for pid, row in self.rows.items() if pid not in mark.listed]


def staged() -> tuple[MarkedFakeTable, TreeReaper]:
    table = MarkedFakeTable()
    table.add(ROOT.pid, ppid=1, sid=SESSION, create_time=ROOT.create_time)
    return table, TreeReaper(table, ROOT, SESSION)


async def test_an_idle_sweep_reads_only_what_appeared_and_still_finds_it() -> None:
    table, reaper = staged()
    table.add(90, ppid=1, sid=999)  # a stranger, there before the first scan
    assert reaper.capture() == []
    child = table.add(120, ppid=ROOT.pid)
    grandchild = table.add(121, ppid=120, sid=121)  # left the session: still a descendant
    orphan = table.add(122, ppid=1)  # double-forked: only the session says it belongs
    stranger = table.add(123, ppid=1, sid=999)
    adopted = await reaper.capture_async()  # runs at once: no full scan to hand off
    assert set(adopted) == {child, grandchild, orphan}
    assert stranger not in adopted
    assert (table.full_scans, table.follow_ups) == (1, 1)


async def test_a_wrapped_pid_counter_means_a_full_scan() -> None:
    table, reaper = staged()
    table.add(110, ppid=1, sid=999)
    assert reaper.capture() == []
    # The counter comes around; the stranger's pid is handed to a new session member.
    table.remove(110)
    table.wrapped = True
    member = table.add(110, ppid=ROOT.pid, create_time=500.0)
    assert reaper.capture() == [member]
    assert (table.full_scans, table.follow_ups) == (2, 0)


async def test_after_an_adoption_every_capture_is_a_full_scan() -> None:
    table, reaper = staged()
    # A double-forked job (in the session, parent init) with a child that left the
    # session: the child belongs only once its parent is captured.
    job = table.add(101, ppid=1)
    left = table.add(102, ppid=101, sid=102)
    assert reaper.capture() == [job]
    assert reaper.capture() == [left]
    assert (table.full_scans, table.follow_ups) == (2, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_procfs_table_lists_what_started_after_its_mark() -> None:
    table = ProcfsProcessTable()
    rows, mark = table.marked_snapshot()
    assert mark is not None
    assert os.getpid() in mark.listed
    assert {row.pid for row in rows} <= mark.listed
    child = subprocess.Popen(["sleep", "30"])
    try:
        fresh = table.appeared_since(mark)
        assert fresh is not None
        pids = {row.pid for row in fresh}
        assert child.pid in pids
        assert os.getpid() not in pids
        # A counter below the mark's newest pid has wrapped, and so may one that saw
        # half the pid space handed out since: only a full scan can tell.
        assert table.appeared_since(attrs.evolve(mark, newest=mark.newest + 10**9)) is None
        assert table.appeared_since(attrs.evolve(mark, forks=mark.forks - 10**9)) is None
    finally:
        child.kill()
        child.wait()
