"""One cgroup across the host's trees: made, limited, joined, emptied by force, removed.

A :class:`CgroupGroup` is the same cgroup name in every tree the limits use (on a hybrid
host: the unified tree for tracking and the v1 ``memory``, ``pids`` and ``cpu`` trees
for the limits). A terminal's child joins its session's group before it execs (the fork
server writes its pid into each ``cgroup.procs``), so no process it ever starts — a
``setsid`` daemon, a double fork, a fork bomb — can be outside it.

Emptying a group is how teardown reaches what the process tree cannot see:

* ``cgroup.kill`` (cgroup v2, Linux 5.14+): one write SIGKILLs every process in the
  group and below, including ones forked meanwhile;
* the v1 ``freezer``: freeze the group (no process in it runs, so none forks or leaves),
  SIGKILL every member, thaw — the kill lands as they wake — and repeat until empty;
* neither (a v1 host without the freezer): SIGKILL what ``cgroup.procs`` lists, again
  and again until it lists nothing; a fork bomb's children are bounded by ``pids.max``.

A pid read from ``cgroup.procs`` is signalled through a pidfd opened before the list is
read again, and only while that second read still lists it, so a pid reused by a
stranger meanwhile is never signalled.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import attrs

from ..kernel.errors import ErrorCode, TerminalError
from .cgroupfs import Hierarchy, read_counter, read_text, remove_tree, write_text

__all__ = [
    "CgroupGroup",
    "KillMethod",
    "LimitCounts",
    "LimitMarks",
    "MEMORY_MARGIN",
    "enable_controllers",
    "is_refusal",
    "make_dirs",
    "own_tree_dir",
    "removals_done",
    "supports_kill",
    "still_running",
]

KillMethod = Literal["cgroup.kill", "freezer", "signal"]

_FIRST_POLL_S = 0.001
_MAX_POLL_S = 0.02
_FROZEN, _THAWED = "FROZEN", "THAWED"  # v1 freezer.state values
# CFS bandwidth, in microseconds: the kernel's smallest quota and its default period.
_MIN_QUOTA_US, _PERIOD_US = 1_000, 100_000


@attrs.frozen
class LimitCounts:
    """How often the kernel enforced a limit on a group: processes it killed for memory
    (``oom_kill``) and forks it refused at the process limit (``pids.events max``)."""

    oom_kills: int = 0
    refused_forks: int = 0


@attrs.frozen
class LimitMarks:
    """Whether an owner's cgroup has ever reached its own limits, read before its
    sessions' counters: ``memory_reached``, its peak memory use came within
    :data:`MEMORY_MARGIN` of its memory limit (v1 ``memory.max_usage_in_bytes`` against
    ``memory.limit_in_bytes``, and the same for memory + swap; v2 ``memory.peak`` against
    ``memory.max``); ``pids_reached``, its peak process count reached its process limit
    (``pids.peak`` against ``pids.max``); ``pids_max``, that limit (None: unlimited).

    The kernel kills a process at the owner's memory limit only when a charge would pass
    it, and refuses a fork only at the process limit, so until a mark is reached no
    session of the owner can have a new ``limit_reached``. The sessions' own counters
    name the session (v1 counts both events only in the cgroup of the process concerned,
    and the owner's ``memory.failcnt`` stays 0 on recent kernels). A peak the kernel
    does not offer counts as reached: the sessions are read, as without the marks.
    """

    memory_reached: bool = False
    pids_reached: bool = False
    pids_max: int | None = None


MEMORY_MARGIN = 4 << 20
"""How near its limit an owner's peak memory use counts as reached: a charge that fails
at the limit can be as large as a huge page (2 MiB) plus a charge batch."""


@attrs.define(eq=False)
class CgroupGroup:
    """The directories of one cgroup, one per tree (``dirs``), and how to empty it.

    ``kill_dir`` is the directory whose ``cgroup.kill`` or ``freezer.state`` empties it
    (None: signal what ``cgroup.procs`` of ``dirs[0]`` lists). ``memory_dir`` and
    ``pids_dir`` are where its limit counters are read (None: not limited there).
    """

    dirs: tuple[str, ...]
    kill_method: KillMethod
    kill_dir: str | None = None
    memory_dir: tuple[int, str] | None = None  # (cgroup version, directory)
    pids_dir: tuple[int, str] | None = None
    cpu_dir: tuple[int, str] | None = None
    removed: bool = attrs.field(default=False, init=False)

    @property
    def procs_files(self) -> tuple[str, ...]:
        """The ``cgroup.procs`` file of each tree: a process joins by writing its pid."""
        return tuple(os.path.join(d, "cgroup.procs") for d in self.dirs)

    def members(self) -> set[int]:
        """Pids in the group (the union over its trees)."""
        found: set[int] = set()
        for directory in self.dirs:
            found |= _pids(os.path.join(directory, "cgroup.procs"))
        return found

    def empty(self) -> bool:
        """True when no process is left in the group (or below it)."""
        if self.kill_method == "cgroup.kill" and self.kill_dir is not None:
            events = read_text(os.path.join(self.kill_dir, "cgroup.events"))
            if events is not None:
                return "populated 0" in events
        return not self._members_below()

    def _members_below(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs:
            for root, _dirs, files in os.walk(directory):
                if "cgroup.procs" in files:
                    found |= _pids(os.path.join(root, "cgroup.procs"))
        return found

    def counts(self) -> LimitCounts:
        """The limit counters of the group as they stand."""
        oom = 0
        if self.memory_dir is not None:
            version, directory = self.memory_dir
            name = "memory.events" if version == 2 else "memory.oom_control"
            oom = read_counter(os.path.join(directory, name), "oom_kill")
        refused = 0
        if self.pids_dir is not None:
            version, directory = self.pids_dir
            local = os.path.join(directory, "pids.events.local")
            name = local if version == 2 and os.path.exists(local) else "pids.events"
            refused = read_counter(os.path.join(directory, name), "max")
        return LimitCounts(oom, refused)

    def marks(self) -> LimitMarks:
        """The group's own limit marks (see :class:`LimitMarks`)."""
        memory = False
        if self.memory_dir is not None:
            version, directory = self.memory_dir
            pairs = (
                [("memory.peak", "memory.max")]
                if version == 2
                else [
                    ("memory.max_usage_in_bytes", "memory.limit_in_bytes"),
                    ("memory.memsw.max_usage_in_bytes", "memory.memsw.limit_in_bytes"),
                ]
            )
            memory = any(_reached(directory, peak, limit, MEMORY_MARGIN) for peak, limit in pairs)
        pids, limit = False, None
        if self.pids_dir is not None:
            _, directory = self.pids_dir
            limit = _number(os.path.join(directory, "pids.max"))
            pids = _reached(directory, "pids.peak", "pids.max", 0)
        return LimitMarks(memory, pids, limit)

    def pids_current(self) -> int | None:
        """How many processes and threads the group holds (None: not counted)."""
        if self.pids_dir is None:
            return None
        return _number(os.path.join(self.pids_dir[1], "pids.current"))

    def cap_cpu(self, percent: int | None) -> bool:
        """Hold the group to ``percent`` % of one CPU (None: lift the cap), through CFS
        bandwidth: v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``. Return whether it was set."""
        if self.cpu_dir is None or self.removed:
            return False
        version, directory = self.cpu_dir
        # The kernel's default period, 100 ms: a shorter one (10 ms) measured no better
        # beside a capped fork bomb, and wakes its hundreds of tasks ten times as often.
        period = _PERIOD_US
        quota = None if percent is None else max(_MIN_QUOTA_US, period * percent // 100)
        try:
            if version == 2:
                write_text(os.path.join(directory, "cpu.max"), f"{quota or 'max'} {period}")
            else:
                write_text(os.path.join(directory, "cpu.cfs_period_us"), str(period))
                write_text(os.path.join(directory, "cpu.cfs_quota_us"), str(quota or -1))
        except OSError:
            return False
        return True

    # -- emptying ---------------------------------------------------------------------

    def kill_once(self) -> None:
        """SIGKILL everything in the group once, without waiting (host exit, first step)."""
        if self.removed:
            return
        if self.kill_method == "cgroup.kill" and self.kill_dir is not None:
            with contextlib.suppress(OSError):
                write_text(os.path.join(self.kill_dir, "cgroup.kill"), "1")
                return
        if self.kill_method == "freezer" and self.kill_dir is not None:
            self._freezer_round()
            return
        _signal_listed(self._members_below, signal.SIGKILL)

    async def kill_all(self, timeout: float) -> bool:
        """SIGKILL everything in the group, repeatedly, until it is empty or ``timeout``
        seconds pass; return whether it is empty.

        A process leaves its cgroup a moment before it has finished exiting, so the ones
        seen at the start are also waited for (their pidfds turn readable at exit): once
        this returns True, none of them runs.
        """
        if self.removed or self.empty():
            return True
        deadline = time.monotonic() + timeout
        seen = _pidfds(self._members_below())
        try:
            delay = _FIRST_POLL_S
            while not self.empty():
                self.kill_once()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return self.empty()
                await asyncio.sleep(min(delay, remaining))
                delay = min(delay * 2, _MAX_POLL_S)
            delay = _FIRST_POLL_S
            while seen and time.monotonic() < deadline:
                seen = still_running(seen)
                if seen:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, _MAX_POLL_S)
            return True
        finally:
            for fd in seen:
                os.close(fd)

    def _freezer_round(self) -> None:
        """Freeze, SIGKILL every member, thaw: frozen processes cannot fork or run away,
        and the kill takes each as it thaws."""
        assert self.kill_dir is not None
        state = os.path.join(self.kill_dir, "freezer.state")
        try:
            write_text(state, _FROZEN)
        except OSError:
            _signal_listed(self._members_below, signal.SIGKILL)
            return
        deadline = time.monotonic() + 0.05
        while (read_text(state) or "").strip() == "FREEZING" and time.monotonic() < deadline:
            time.sleep(0.0005)
        try:
            _signal_listed(self._members_below, signal.SIGKILL)
        finally:
            with contextlib.suppress(OSError):
                write_text(state, _THAWED)

    def remove(self) -> bool:
        """Remove the group's directories (a directory that still holds a process stays);
        return whether all are gone."""
        gone = all([remove_tree(directory) for directory in self.dirs])
        self.removed = self.removed or gone
        return gone

    async def clear(self, grace: float, *, removal: bool = True) -> None:
        """Kill everything left in the group — what a process tree cannot see: ``setsid``
        daemons, double forks, a fork bomb's stragglers — then remove it.

        ``removal=False`` (a session's close): return once the group is empty; a directory
        the kernel still holds busy for a moment (its killed processes finishing their
        exit) is removed in the background, off the caller's path. Nothing can run in it
        any more by then, and whatever is left is removed with its owner's group.

        Raises:
            TerminalError: ``TEARDOWN_FAILED`` when processes stay in it past ``grace``.
        """
        if self.removed:
            return
        if not await self.kill_all(grace):
            left = ", ".join(str(pid) for pid in sorted(self._members_below())) or "unknown"
            raise TerminalError(
                "terminal teardown failed: processes still in the session's cgroup "
                f"after SIGKILL: {left}",
                ErrorCode.TEARDOWN_FAILED,
            )
        if removal or self.remove():
            await self.remove_soon(grace)
            return
        task = asyncio.get_running_loop().create_task(self.remove_soon(grace))
        _removing.add(task)
        task.add_done_callback(_removing.discard)

    async def discard(self) -> None:
        """Empty and remove the group of a spawn that failed; never raises."""
        with contextlib.suppress(Exception):
            await self.kill_all(1.0)
            await self.remove_soon(1.0)

    async def remove_soon(self, timeout: float = 1.0) -> bool:
        """:meth:`remove`, retried for ``timeout`` seconds: a killed process leaves its
        cgroup a moment after it is reported gone."""
        deadline = time.monotonic() + timeout
        delay = _FIRST_POLL_S
        while not self.remove():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_POLL_S)
        return True


def _reached(directory: str, peak_file: str, limit_file: str, margin: int) -> bool:
    """True when the peak in ``peak_file`` came within ``margin`` of the limit in
    ``limit_file``, or the peak is unknown while a limit is set."""
    limit = _number(os.path.join(directory, limit_file))
    if limit is None:
        return False  # unlimited (or no such file: nothing to reach)
    peak = _number(os.path.join(directory, peak_file))
    return peak is None or peak + margin >= limit


_removing: set[asyncio.Task[bool]] = set()
"""Removals of emptied session cgroups still under way (kept from being collected)."""


async def removals_done() -> None:
    """Wait for the background removals of this loop's emptied session cgroups."""
    loop = asyncio.get_running_loop()
    pending = [task for task in _removing if task.get_loop() is loop]
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


def _number(path: str) -> int | None:
    """The integer a one-value file holds; None when absent, unreadable or ``max``."""
    text = (read_text(path) or "").strip()
    return int(text) if text.isdigit() else None


def _pids(procs: str) -> set[int]:
    text = read_text(procs)
    if not text:
        return set()
    return {int(word) for word in text.split() if word.isdigit()}


def _pidfds(pids: set[int]) -> list[int]:
    fds = []
    for pid in pids:
        with contextlib.suppress(OSError):
            fds.append(os.pidfd_open(pid))
    return fds


def still_running(fds: list[int]) -> list[int]:
    """The pidfds whose process has not exited yet; the others are closed."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    exited = {fd for fd, _ in poller.poll(0)}
    for fd in exited:
        os.close(fd)
    return [fd for fd in fds if fd not in exited]


def _signal_listed(listed: Callable[[], set[int]], signum: int) -> None:
    """Signal each pid ``listed()`` gives, through a pidfd, only if it is still listed
    after the pidfd was opened (so it names the member, never a stranger with its pid)."""
    first = listed()
    if not first:
        return
    fds: dict[int, int] = {}
    for pid in first:
        with contextlib.suppress(OSError):
            fds[pid] = os.pidfd_open(pid)
    try:
        still = listed()
        for pid, fd in fds.items():
            if pid in still:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(fd, signum)
    finally:
        for fd in fds.values():
            os.close(fd)


def make_dirs(directories: Sequence[str]) -> list[str]:
    """Create each directory (its parent must exist); return those this call created.

    Raises:
        OSError: the first refusal, after removing what this call created.
    """
    made: list[str] = []
    try:
        for directory in directories:
            try:
                os.mkdir(directory)
            except FileExistsError:
                continue
            made.append(directory)
    except OSError:
        for directory in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        raise
    return made


def enable_controllers(directory: str, controllers: Iterable[str]) -> None:
    """Let the cgroups below ``directory`` (v2) use ``controllers``.

    Raises:
        OSError: ``EBUSY`` when ``directory`` holds processes itself (v2 lets a cgroup
            hand controllers down only while it has none, its root excepted).
    """
    wanted = list(controllers)
    if not wanted:
        return
    current = (read_text(os.path.join(directory, "cgroup.subtree_control")) or "").split()
    missing = [c for c in wanted if c not in current]
    if missing:
        write_text(
            os.path.join(directory, "cgroup.subtree_control"), " ".join(f"+{c}" for c in missing)
        )


def supports_kill(directory: str) -> bool:
    """True when a v2 cgroup offers ``cgroup.kill`` (Linux 5.14 and later)."""
    return os.path.exists(os.path.join(directory, "cgroup.kill"))


def own_tree_dir(tree: Hierarchy, parent: str | None) -> str:
    """Where the harness nests its cgroups in ``tree``: its own cgroup, or ``parent`` when
    configured (``/dsh.slice`` from the tree's root; ``outer`` below its own cgroup)."""
    if parent is None:
        return tree.own
    return tree.at(parent) if parent.startswith("/") else os.path.join(tree.own, parent)


def is_refusal(exc: OSError) -> bool:
    """True for the errors of a host that gives no cgroup access (not a bug of ours)."""
    return exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.EBUSY)
