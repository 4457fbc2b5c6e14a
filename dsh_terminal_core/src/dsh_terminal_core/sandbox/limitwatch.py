"""Reading the owners' limit counters: who to tell, and which runaway session to slow.

Every ``watch_interval_ms`` the watcher reads each owner's own marks first
(:class:`~dsh_terminal_core.provider.cgroups.LimitMarks`: its peak memory use and
process count against its limits) and reads the counters of that owner's sessions only
once a limit of the owner can have been enforced: its peak has reached the limit. A
harness with a thousand sessions of owners that stay within their limits reads a few
files per owner each second, not two per session.

**A session that trips a limit is slowed.** The kernel refusing forks at the owner's
process limit does not stop a fork bomb: bash retries each refused fork after 1, 2, 4
and 8 s, and the bomb's hundreds of processes wake together, fork, exit and fork again
— bursts of hundreds of runnable tasks, mostly in the kernel. Their owner's CPU weight
is only a share *when the CPU is busy*; the wake-up bursts still delay every other
owner's shells and the harness itself (measured: the other owner's p99 send latency at
3.7x its quiet figure; the bomb's steady state costs under 0.1 CPU, its bursts 0.4).
So a session in which the kernel refused a fork while it held at least a quarter of
the owner's process limit (a fork bomb, not a bystander whose one fork was refused
because its sibling took the room), or in which the kernel killed a process for memory
(a hog that restarts), is held to ``runaway_cpu_percent`` % of one CPU (CFS bandwidth:
``cpu.max`` / ``cpu.cfs_quota_us``) and its owner is told so in the ``limit_reached``
notice. The cap is lifted once no limit has tripped in it for :data:`CALM_S` seconds
and it holds less than a quarter of the owner's process limit. Work that stays within
its limits is never capped.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

import attrs

from ..kernel.agents import Agent, Notice
from ..provider.cgroups import CgroupGroup, LimitCounts, LimitMarks

__all__ = ["CALM_S", "LimitWatch"]

CALM_S = 30.0
"""How long a capped session must go without tripping a limit before its cap is lifted."""
_HOLDING = 4  # a session holding 1/_HOLDING of the owner's process limit is a runaway


@attrs.define(eq=False)
class _Session:
    owner: weakref.ref[Agent]
    session_id: str
    counts: LimitCounts
    capped_until: float | None = None  # monotonic time the cap may be lifted after


@attrs.define(eq=False)
class _Owner:
    group: CgroupGroup
    marks: LimitMarks
    sessions: dict[CgroupGroup, _Session] = attrs.Factory(dict)


Notices = Callable[[str, LimitCounts, LimitCounts, bool], list[Notice]]


class LimitWatch:
    """The sessions watched, by owner; :meth:`check` reads them (see the module doc).

    ``notices(session_id, before, now, capped)`` makes the notices for counters that
    rose; ``cpu_percent`` is the cap of a runaway session (None: never capped).
    """

    def __init__(self, notices: Notices, cpu_percent: int | None) -> None:
        self._notices = notices
        self._cpu_percent = cpu_percent
        self._owners: dict[str, _Owner] = {}
        self._capped: dict[CgroupGroup, tuple[_Owner, _Session]] = {}

    def __bool__(self) -> bool:
        return bool(self._owners)

    def add(self, owner: Agent, owner_group: CgroupGroup, group: CgroupGroup,
            session_id: str) -> None:
        """Watch ``owner``'s new session ``session_id`` (its cgroup ``group``)."""
        key = owner_group.dirs[0]
        watched = self._owners.get(key)
        if watched is None:
            watched = self._owners[key] = _Owner(owner_group, owner_group.marks())
        watched.sessions[group] = _Session(weakref.ref(owner), session_id, group.counts())

    def clear(self) -> None:
        self._owners.clear()
        self._capped.clear()

    def check(self, now: float | None = None) -> None:
        """Read what may have changed; tell the owners; cap and lift runaway sessions."""
        now = time.monotonic() if now is None else now
        for key, watched in list(self._owners.items()):
            self._forget_gone(watched)
            if not watched.sessions:
                del self._owners[key]
                continue
            marks = watched.group.marks()
            if not (marks.memory_reached or marks.pids_reached):
                continue
            watched.marks = marks
            for group, session in list(watched.sessions.items()):
                self._check_session(watched, group, session, now)
        self._lift_calm(now)

    def _forget_gone(self, watched: _Owner) -> None:
        for group, session in list(watched.sessions.items()):
            if group.removed or session.owner() is None:
                del watched.sessions[group]
                self._capped.pop(group, None)

    def _check_session(
        self, watched: _Owner, group: CgroupGroup, session: _Session, now: float
    ) -> None:
        counts = group.counts()
        before = session.counts
        if counts == before:
            return
        session.counts = counts
        capped = self._cap_if_runaway(watched, group, session, before, counts, now)
        owner = session.owner()
        if owner is None or not owner.live:
            return
        for notice in self._notices(session.session_id, before, counts, capped):
            owner.notify(notice)

    def _cap_if_runaway(
        self, watched: _Owner, group: CgroupGroup, session: _Session,
        before: LimitCounts, counts: LimitCounts, now: float,
    ) -> bool:
        """Cap ``group`` when what rose makes it a runaway; True when it is capped now."""
        if self._cpu_percent is None:
            return False
        killed = counts.oom_kills > before.oom_kills
        refused = counts.refused_forks > before.refused_forks
        runaway = killed or (refused and _holds_a_quarter(group, watched.marks))
        if not runaway:
            return session.capped_until is not None
        if session.capped_until is None and not group.cap_cpu(self._cpu_percent):
            return False
        session.capped_until = now + CALM_S
        self._capped[group] = (watched, session)
        return True

    def _lift_calm(self, now: float) -> None:
        for group, (watched, session) in list(self._capped.items()):
            if session.capped_until is None or now < session.capped_until:
                continue
            if group.counts() != session.counts:
                continue  # it tripped again: the owner's next read tells and re-arms
            if _holds_a_quarter(group, watched.group.marks()):
                continue
            group.cap_cpu(None)
            session.capped_until = None
            del self._capped[group]


def _holds_a_quarter(group: CgroupGroup, owner: LimitMarks) -> bool:
    if owner.pids_max is None:
        return False
    held = group.pids_current()
    return held is not None and held * _HOLDING >= owner.pids_max
