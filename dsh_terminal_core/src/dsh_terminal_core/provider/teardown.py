"""Full-tree TERM -> KILL teardown of one terminal's processes.

What belongs to a terminal is decided by identity, never by pid alone. The tree is
captured from two sources: descendants of the PTY child and members of the PTY's POSIX
session (a background job that double-forked is no longer a descendant, but it is still
in the session). Newly scanned processes are adopted only while the PTY child (the root)
still carries its start identity — the pid-reuse fence: once the root is reaped its pid
may name a stranger, whose children and session must not be touched. Children of an
already captured process are adopted for as long as that parent still carries its own
identity, so a process that forks while handling SIGTERM cannot hand off its work.

Every signal re-checks the target's identity, and zombies count as gone: they have
exited, and reaping them is their parent's (or init's) job.

A capture after one that adopted nothing reads only the processes that appeared since
(where the table can tell, see :class:`MarkedTable`): a process that was neither below
the root nor in its session then cannot join later — a session is never joined, and a
process is reparented only to an ancestor or init, none of them in the tree — so only a
new process can belong. That is the common close of an idle shell: the sweep at the
shell's exit costs a handful of reads instead of a second scan of every process.

The full scans a teardown makes on the event loop's behalf are shared with every other
teardown in flight (:class:`.scans.ScanShare`): an owner closing a thousand terminals
reads the table a handful of times, not four times per terminal.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from ..kernel.errors import TerminalError
from .process_table import MarkedTable, ProcessIdentity, ProcessInfo, ProcessTable, ScanMark
from .scans import Scan, ScanShare, full_scan

__all__ = ["ShellControl", "TreeReaper"]

_FIRST_POLL_S = 0.001
_MAX_POLL_S = 0.05


class ShellControl(Protocol):
    """The PTY child as teardown needs it; the owner reaps it and knows when it is gone."""

    @property
    def exited(self) -> bool:
        """True once the PTY child has been reaped."""
        ...

    def signal_shell(self, signum: int) -> None:
        """Send ``signum`` to the PTY child; a no-op once it has been reaped."""
        ...

    async def wait_exit(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the child to be reaped; return ``exited``."""
        ...


class TreeReaper:
    """The captured process tree of one terminal, and the sequence that ends it.

    ``root`` is the PTY child and ``session`` its session id. The reaper never signals
    the root itself; :meth:`teardown` stops it through :class:`ShellControl` so the owner
    can reap it and record its exit status.

    ``scans`` shares the full scans of :meth:`capture_async` with the other reapers of the
    same table (the provider passes one per table); without it the reaper has its own.
    """

    def __init__(
        self,
        table: ProcessTable,
        root: ProcessIdentity,
        session: int,
        scans: ScanShare | None = None,
    ) -> None:
        self._table = table
        self._scans = scans if scans is not None and scans.table is table else ScanShare(table)
        self._root = root
        self._session = session
        self._captured: dict[ProcessIdentity, None] = {}
        # Captures run in worker threads (teardown and exit may overlap); guard the set.
        self._lock = threading.Lock()
        self._fence_open = True
        self._mark: ScanMark | None = None  # the last full scan, while it adopted nothing

    @property
    def captured(self) -> tuple[ProcessIdentity, ...]:
        """Every process ever adopted, in adoption order (including ones now gone)."""
        with self._lock:
            return tuple(self._captured)

    @property
    def fence_open(self) -> bool:
        """True while the root may still carry its start identity."""
        return self._fence_open

    def close_fence(self) -> None:
        """Stop adopting by root and session: call once the root has been reaped."""
        self._fence_open = False

    def capture(self) -> list[ProcessIdentity]:
        """Scan the table and adopt what belongs to the terminal; return the new adoptees.

        The root is checked before and after the scan: identity is never regained once
        lost, so a root that still matches after the scan was the same process for every
        row read during it.
        """
        roots_ok = self._fence_open and self._root_matches()
        if not roots_ok and not self.captured:
            return []
        return self._adopt(self._scan(), roots_ok)

    async def capture_async(self) -> list[ProcessIdentity]:
        """:meth:`capture` with its full scan in a worker thread, shared with the other
        captures that ask for one meanwhile (see :class:`.scans.ScanShare`); a full scan
        does not belong on the loop.

        A capture that only reads what appeared since the last scan runs here at once.
        """
        if self._follow_up_mark() is not None:
            return self.capture()
        roots_ok = self._fence_open and self._root_matches()
        if not roots_ok and not self.captured:
            return []
        scan = await self._scans.fresh()  # begun after the root was checked
        with self._lock:
            self._mark = scan.mark
        return self._adopt(scan, roots_ok)

    def _adopt(self, scan: Scan, roots_ok: bool) -> list[ProcessIdentity]:
        roots_ok = roots_ok and self._root_matches()
        parents = self._verified_parents(scan.by_pid, include_root=roots_ok)
        adopted: list[ProcessIdentity] = []
        belonging = self._belonging(scan, parents, session=roots_ok)
        with self._lock:
            for row in belonging:
                identity = row.identity
                if identity not in self._captured:
                    self._captured[identity] = None
                    adopted.append(identity)
        return adopted

    def _follow_up_mark(self) -> ScanMark | None:
        """The full scan a capture may follow up on: set while nothing was ever adopted."""
        with self._lock:
            return self._mark if not self._captured else None

    def _scan(self) -> Scan:
        """The processes that may belong: those that appeared since the last full scan
        when nothing was adopted yet (see the module docstring), else every process."""
        table = self._table
        mark = self._follow_up_mark()
        if mark is not None and isinstance(table, MarkedTable):
            fresh = table.appeared_since(mark)
            if fresh is not None:
                return Scan.of(fresh)
        scan = full_scan(table)
        with self._lock:
            self._mark = scan.mark
        return scan

    def live(self) -> list[ProcessIdentity]:
        """Return captured processes still running (not gone, not reused, not zombies)."""
        return [identity for identity in self.captured if self._alive(identity)]

    def signal(self, targets: Iterable[ProcessIdentity], signum: int) -> None:
        """Send ``signum`` to each target that still carries its identity."""
        for identity in targets:
            self._table.send_signal(identity, signum)

    async def wait_gone(
        self, targets: Sequence[ProcessIdentity], timeout: float
    ) -> list[ProcessIdentity]:
        """Wait up to ``timeout`` seconds for ``targets`` to go; return the survivors.

        Returns as soon as all are gone. Non-child processes offer no exit event, so this
        polls the table with a short exponential backoff (teardown, not a hot path).
        """
        deadline = time.monotonic() + timeout
        delay = _FIRST_POLL_S
        pending = [identity for identity in targets if self._alive(identity)]
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, _MAX_POLL_S)
            pending = [identity for identity in pending if self._alive(identity)]
        return pending

    async def teardown(self, shell: ShellControl, grace: float) -> None:
        """End the whole tree, then the shell, then whatever the shell's exit revealed.

        Ask the captured tree to leave — SIGTERM; SIGHUP as well to a process that
        ignores SIGTERM, because closing a terminal is a hangup and an interactive shell
        (nested, or under a sandbox wrapper) ignores SIGTERM but honours SIGHUP; SIGCONT
        so stopped jobs can act — and wait up to ``grace``. Rescan for children forked
        meanwhile and KILL the union. Stop the shell the same polite way, repeated with
        backoff, and KILL it after ``grace``. Finally KILL anything adopted since.
        A process that handles SIGTERM never gets SIGHUP first, so its handler runs.

        Raises:
            TerminalError: ``TEARDOWN_FAILED`` naming the pids that survived, or saying
                the shell was not reaped. A later call may retry.
        """
        await self.capture_async()
        first = self.live()
        if first:
            # Wait only for what a polite signal can reach: a process that drops them
            # all (a sandbox's pid 1 hears nothing from outside) leaves with its
            # children or is killed with the rest once they are gone.
            await self.wait_gone(self._ask_to_leave(first), grace)
            await self.capture_async()
        await self._kill_live(grace)
        if not shell.exited and not await self._ask_shell_to_exit(shell, grace):
            shell.signal_shell(signal.SIGKILL)
            await shell.wait_exit(grace)
        # The shell's exit may have revealed late members; sweep once more.
        if self._fence_open:
            await self.capture_async()
        await self._kill_live(grace)
        survivors = self.live()
        if survivors or not shell.exited:
            raise TerminalError(self._failure(survivors, shell.exited), "TEARDOWN_FAILED")

    def kill_sync(self) -> None:
        """Synchronously adopt what is left and SIGKILL it; for host exit, never waits."""
        self.capture()
        self.signal(self.live(), signal.SIGKILL)

    def _ask_to_leave(self, targets: Sequence[ProcessIdentity]) -> list[ProcessIdentity]:
        """Send each target the polite signals; return those that may hear one of them.

        Unreachable is a target that drops SIGTERM, SIGHUP and SIGCONT alike (a sandbox's
        pid 1 without handlers); the disposition read that decides on SIGHUP counts.
        """
        table = self._table
        reachable: list[ProcessIdentity] = []
        for identity in targets:
            table.send_signal(identity, signal.SIGTERM)
            drops_term = table.ignores(identity, signal.SIGTERM) is True
            if drops_term:
                table.send_signal(identity, signal.SIGHUP)
            table.send_signal(identity, signal.SIGCONT)
            if not (drops_term and self._drops(identity, (signal.SIGHUP, signal.SIGCONT))):
                reachable.append(identity)
        return reachable

    def _drops(self, identity: ProcessIdentity, signals: Iterable[int]) -> bool:
        """True if ``identity`` surely drops every one of ``signals``."""
        return all(self._table.ignores(identity, sig) is True for sig in signals)

    async def _ask_shell_to_exit(self, shell: ShellControl, grace: float) -> bool:
        """Send SIGTERM, and SIGHUP unless it surely handles SIGTERM; repeat with backoff.

        The shell leads the terminal's session, and SIGHUP is what a closed terminal sends
        its session leader, so it is withheld only where SIGTERM is known to be heard.

        A signal that lands while a program is still installing its handlers can be
        lost — measured: bash drops a SIGHUP arriving about 0.5 ms after its exec and
        then waits at its prompt — so one polite signal is not enough evidence of
        stubbornness. Returns whether the shell was reaped within ``grace``.
        """
        deadline = time.monotonic() + grace
        step = 0.01
        while True:
            shell.signal_shell(signal.SIGTERM)
            if self._table.ignores(self._root, signal.SIGTERM) is not False:
                shell.signal_shell(signal.SIGHUP)
            remaining = deadline - time.monotonic()
            if await shell.wait_exit(max(0.0, min(step, remaining))):
                return True
            if remaining <= step:
                return False
            step *= 2

    async def _kill_live(self, grace: float) -> None:
        targets = self.live()
        if targets:
            self.signal(targets, signal.SIGKILL)
            await self.wait_gone(targets, grace)

    def _failure(self, survivors: Sequence[ProcessIdentity], shell_exited: bool) -> str:
        parts = []
        if survivors:
            pids = ", ".join(str(identity.pid) for identity in survivors)
            parts.append(f"processes still running after SIGKILL: {pids}")
        if not shell_exited:
            parts.append(f"terminal process {self._root.pid} was not reaped")
        return "terminal teardown failed: " + "; ".join(parts)

    def _root_matches(self) -> bool:
        row = self._table.lookup(self._root.pid)
        if row is None or row.create_time != self._root.create_time:
            self._fence_open = False
            return False
        return True

    def _alive(self, identity: ProcessIdentity) -> bool:
        row = self._table.lookup(identity.pid)
        return row is not None and row.create_time == identity.create_time and not row.zombie

    def _verified_parents(
        self, by_pid: Mapping[int, ProcessInfo], *, include_root: bool
    ) -> set[int]:
        """Pids whose children may be adopted: the root (fence open) and captured processes
        that matched both in the snapshot and after it."""
        parents = {self._root.pid} if include_root else set()
        for identity in self.captured:
            row = by_pid.get(identity.pid)
            if (
                row is not None
                and row.create_time == identity.create_time
                and self._alive(identity)
            ):
                parents.add(identity.pid)
        return parents

    def _belonging(self, scan: Scan, parents: set[int], *, session: bool) -> list[ProcessInfo]:
        found: dict[int, ProcessInfo] = {}
        stack = list(parents)
        while stack:
            for row in scan.children.get(stack.pop(), ()):
                if row.pid not in found and row.pid not in parents:
                    found[row.pid] = row
                    stack.append(row.pid)
        if session:
            for row in scan.members.get(self._session, ()):
                if row.pid != self._root.pid:
                    found.setdefault(row.pid, row)
        return [row for row in found.values() if not row.zombie and row.pid != self._root.pid]
