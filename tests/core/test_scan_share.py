"""Teardowns in flight share their full scans of the process table (SPEC §24: an owner's
dispose closes a thousand terminals in seconds, not one scan of every process per close),
and a shared scan still sees everything that existed when its asker asked."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Sequence

from dsh_terminal_core.provider import ProcessIdentity, ProcessInfo, TreeReaper
from dsh_terminal_core.provider.scans import Scan, ScanShare

from .test_provider_teardown_staged import GRACE, FakeShell, FakeTable


class CountingTable(FakeTable):
    """A fake table whose full scans are counted and can be held mid-scan."""

    def __init__(self) -> None:
        super().__init__()
        self.scans = 0
        self.hold: threading.Event | None = None
        self.in_scan = threading.Event()

    def snapshot(self) -> Sequence[ProcessInfo]:
        self.scans += 1
        rows = super().snapshot()  # listed first; then the test may act mid-scan
        self.in_scan.set()
        if self.hold is not None:
            self.hold.wait(5)
        return rows


async def test_askers_during_a_scan_share_the_next_one_which_sees_what_they_saw() -> None:
    table = CountingTable()
    share = ScanShare(table)
    table.add(10, ppid=1, sid=10)
    table.hold = threading.Event()
    first = asyncio.ensure_future(share.fresh())
    await asyncio.to_thread(table.in_scan.wait, 5)  # the first scan is under way
    late = table.add(11, ppid=1, sid=11)  # after that scan listed the table
    waiters = [asyncio.ensure_future(share.fresh()) for _ in range(50)]
    table.hold.set()
    scan = await first
    later: list[Scan] = await asyncio.gather(*waiters)
    assert table.scans == 2  # 51 askers, two scans
    assert all(s is later[0] for s in later)
    assert late.pid in later[0].by_pid and late.pid not in scan.by_pid


async def test_a_cancelled_asker_leaves_the_scan_to_the_others() -> None:
    table = CountingTable()
    share = ScanShare(table)
    table.add(10, ppid=1, sid=10)
    table.hold = threading.Event()
    gone = asyncio.ensure_future(share.fresh())
    stays = asyncio.ensure_future(share.fresh())
    await asyncio.to_thread(table.in_scan.wait, 5)
    gone.cancel()
    table.hold.set()
    assert 10 in (await stays).by_pid
    assert gone.cancelled()


async def test_a_failed_scan_fails_its_askers_and_the_next_asker_scans_again() -> None:
    class Broken(FakeTable):
        fail = True

        def snapshot(self) -> Sequence[ProcessInfo]:
            if self.fail:
                self.fail = False
                raise OSError("no /proc")
            return super().snapshot()

    table = Broken()
    share = ScanShare(table)
    results = await asyncio.gather(share.fresh(), share.fresh(), return_exceptions=True)
    assert all(isinstance(r, OSError) for r in results)
    assert (await share.fresh()).rows == []


async def test_a_hundred_teardowns_at_once_scan_a_few_times_and_end_every_tree() -> None:
    table = CountingTable()
    share = ScanShare(table)
    reapers: list[tuple[TreeReaper, FakeShell, ProcessIdentity]] = []
    for n in range(100):
        root = ProcessIdentity(1000 + 10 * n, float(1000 + 10 * n))
        table.add(root.pid, ppid=1, sid=root.pid, create_time=root.create_time)
        child = table.add(root.pid + 1, ppid=root.pid, sid=root.pid)
        # Double-forked: found only as a member of the root's session.
        orphan = table.add(root.pid + 2, ppid=1, sid=root.pid)
        reaper = TreeReaper(table, root, root.pid, share)
        reapers.append((reaper, _Shell(table, root), child))
        table.behaviours[orphan] = lambda signum, pid=orphan.pid: (
            table.remove(pid) if signum == signal.SIGKILL else None
        )
    await asyncio.gather(*(reaper.teardown(shell, GRACE) for reaper, shell, _ in reapers))
    assert all(shell.exited for _, shell, _ in reapers)
    assert set(table.rows) == set()  # every child and every orphan gone
    for reaper, _, child in reapers:
        assert child in reaper.captured and len(reaper.captured) == 2
    assert table.scans <= 12, table.scans  # alone, each teardown scans three times


class _Shell(FakeShell):
    """:class:`FakeShell` for a root of its own."""

    def __init__(self, table: FakeTable, root: ProcessIdentity) -> None:
        super().__init__(table)
        self._root = root

    def signal_shell(self, signum: int) -> None:
        if not self.exited:
            self.signals.append(signum)
            self.exited = True
            self._table.remove(self._root.pid)
