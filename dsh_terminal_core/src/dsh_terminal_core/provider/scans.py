"""Full scans of the process table, shared by the teardowns that need one at the same time.

A teardown adopts what belongs to its terminal from a scan of every process on the
machine (descendants and session members: no index of a session's members exists). Each
close needs a few such scans, and each scan reads every process, so a thousand closes at
once, each scanning for itself, read the table some four thousand times — with a thousand
shells (three thousand processes under bubblewrap) that is tens of seconds of CPU, and
the closes finish one after another at the pace of the scans: measured, 49 s for 1,000
sandboxed sessions, nine tenths of it in ``/proc/<pid>/stat`` reads.

:class:`ScanShare` lets them share. A capture asks for a scan that *starts after it
asked* — what it must see (a child forked a moment ago, the members left once the shell
exited) exists by then — and every capture that asks while one scan runs is served by
the next one, which starts as soon as the running one ends. So there is at most one scan
at a time per event loop, each waiter waits at most two scan lengths, and a burst of N
closes costs a handful of scans instead of ~4N. Each scan comes indexed
(:class:`Scan`: by pid, by parent, by session) so every capture walks only its own tree.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Mapping, Sequence

import attrs

from .process_table import MarkedTable, ProcessInfo, ProcessTable, ScanMark

__all__ = ["Scan", "ScanShare"]


@attrs.frozen(eq=False)
class Scan:
    """One reading of the process table, indexed for the captures that share it."""

    rows: Sequence[ProcessInfo]
    mark: ScanMark | None
    by_pid: Mapping[int, ProcessInfo]
    children: Mapping[int, Sequence[ProcessInfo]]
    members: Mapping[int, Sequence[ProcessInfo]]

    @classmethod
    def of(cls, rows: Sequence[ProcessInfo], mark: ScanMark | None = None) -> Scan:
        by_pid: dict[int, ProcessInfo] = {}
        children: dict[int, list[ProcessInfo]] = {}
        members: dict[int, list[ProcessInfo]] = {}
        for row in rows:
            by_pid[row.pid] = row
            children.setdefault(row.ppid, []).append(row)
            members.setdefault(row.sid, []).append(row)
        return cls(rows=rows, mark=mark, by_pid=by_pid, children=children, members=members)


def full_scan(table: ProcessTable) -> Scan:
    """Read every process of ``table`` now (with its mark where the table keeps one)."""
    if isinstance(table, MarkedTable):
        rows, mark = table.marked_snapshot()
        return Scan.of(rows, mark)
    return Scan.of(table.snapshot())


@attrs.define(eq=False)
class _LoopState:
    """The scan a loop's waiters are queued for, and the task running the scans."""

    next: asyncio.Future[Scan] | None = None
    runner: asyncio.Task[None] | None = None


class ScanShare:
    """Full scans of ``table``, one at a time per event loop, shared by their askers."""

    def __init__(self, table: ProcessTable) -> None:
        self._table = table
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState]
        self._loops = weakref.WeakKeyDictionary()

    @property
    def table(self) -> ProcessTable:
        return self._table

    async def fresh(self) -> Scan:
        """A full scan (run in a worker thread) that began after this call.

        Cancelling the caller leaves the scan running for the others.
        """
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None:
            state = self._loops[loop] = _LoopState()
        waiters = state.next
        if waiters is None:
            # Not started yet: whoever joins it before the runner takes it still asked
            # before it began.
            waiters = state.next = loop.create_future()
            waiters.add_done_callback(_retrieve)
            if state.runner is None:
                state.runner = loop.create_task(self._run(state))
        return await asyncio.shield(waiters)

    async def _run(self, state: _LoopState) -> None:
        try:
            while state.next is not None:
                waiters, state.next = state.next, None
                try:
                    scan = await asyncio.to_thread(full_scan, self._table)
                except BaseException as exc:
                    if not waiters.done():
                        if isinstance(exc, asyncio.CancelledError):
                            waiters.cancel()
                        else:
                            waiters.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                else:
                    if not waiters.done():
                        waiters.set_result(scan)
        finally:
            state.runner = None
            queued, state.next = state.next, None
            if queued is not None and not queued.done():
                queued.cancel()


def _retrieve(future: asyncio.Future[Scan]) -> None:
    # Every waiter may have been cancelled; a failed scan must not be logged as lost.
    if not future.cancelled():
        future.exception()
