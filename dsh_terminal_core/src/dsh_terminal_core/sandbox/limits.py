"""Limits per owner through cgroups: one owner's runaway shell cannot take the host.

Each owner gets a cgroup holding a memory limit, a process limit and a CPU weight; each
of its sessions gets a cgroup of its own below it, which the shell joins before it
execs (:class:`~dsh_terminal_core.provider.CgroupGroup`). The tree, in every cgroup
hierarchy the limits use::

    <the harness's own cgroup, or the configured parent>
      dsh-<harness pid>-<start>-<n>/        one per service, removed at its disposal
        o<k>-<owner id>/                    memory.max, pids.max, cpu.weight
          <session id>/                     the shell and all it ever starts

Where the host mounts cgroup v2 (alone or beside v1) the session cgroup in the unified
tree is emptied with ``cgroup.kill``; on a v1 host with the freezer, by freezing it and
killing every member. The harness process itself stays outside its owners' cgroups, so
a fork bomb or a memory hog meets its owner's limit, never the harness.

What the host cannot give is decided once, at the first open (see
:class:`~.limitconfig.OwnerLimitsConfig`): a limit configured explicitly, or any part
under ``cgroups = "require"``, fails every open with ``LIMITS_UNAVAILABLE`` naming what
is missing; a default the host cannot enforce is logged once and skipped.

When the kernel enforces a limit — it kills a process for memory, or refuses a fork at
the process limit — the owner gets a ``limit_reached`` notice naming the session and the
limit (read from the counters every ``watch_interval_ms``, an owner's sessions only when
the owner's own counters say a limit can have been met), and a session that tripped it
as a runaway does is held to ``runaway_cpu_percent`` % of one CPU until it calms down
(:mod:`.limitwatch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import weakref

import attrs
import psutil

from ..kernel.agents import Agent, Notice
from ..kernel.errors import ErrorCode, TerminalError
from ..provider.cgroupfs import CgroupHost, Hierarchy, discover, write_text
from ..provider.cgroups import (
    CgroupGroup,
    KillMethod,
    LimitCounts,
    enable_controllers,
    is_refusal,
    make_dirs,
    own_tree_dir,
    removals_done,
    supports_kill,
)
from .limitwatch import CALM_S, LimitWatch
from .limitconfig import (
    DEFAULT_CPU_WEIGHT,
    DEFAULT_MEMORY_PERCENT,
    DEFAULT_PIDS_MAX,
    OwnerLimitsConfig,
    host_memory_bytes,
    memory_bytes,
)

__all__ = ["LimitPlan", "OwnerLimitsService"]

_log = logging.getLogger(__name__)
_PREFIX = "dsh-"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@attrs.frozen
class _Limit:
    """One limit as planned: its controller, value (None: unlimited), and where it goes."""

    controller: str
    value: int | None
    explicit: bool
    tree: Hierarchy | None


@attrs.frozen(kw_only=True)
class LimitPlan:
    """What the service enforces on this host, decided once at the first open.

    ``bases`` maps each tree's mount to the service's directory in it; ``limits`` the
    limits it applies; ``kill_method``/``kill_mount`` how a session's cgroup is emptied;
    ``missing`` what the host could not give (skipped defaults), for the log and docs.
    """

    layout: str
    bases: dict[str, str]
    limits: tuple[_Limit, ...]
    kill_method: KillMethod | None
    kill_mount: str | None
    missing: tuple[str, ...]


class OwnerLimitsService:
    """``ctx.owner_limits``: makes each session's cgroup under its owner's limits."""

    def __init__(self, config: OwnerLimitsConfig | None = None) -> None:
        self._config = config if config is not None else OwnerLimitsConfig()
        self._plan: LimitPlan | None = None
        self._refusal: TerminalError | None = None
        self._owners: weakref.WeakKeyDictionary[Agent, tuple[str, CgroupGroup]] = (
            weakref.WeakKeyDictionary()
        )
        self._numbers = itertools.count(1)
        self._watched = LimitWatch(self._notices, self._config.runaway_cpu_percent)
        self._watcher: asyncio.Task[None] | None = None
        self._disposed = False

    @property
    def config(self) -> OwnerLimitsConfig:
        return self._config

    def plan(self) -> LimitPlan | None:
        """The plan for this host (made at the first call); None with ``cgroups = "off"``.

        Raises:
            TerminalError: ``LIMITS_UNAVAILABLE`` when a required part cannot be had.
        """
        if self._refusal is not None:
            raise self._refusal
        if self._plan is None and self._config.cgroups != "off":
            try:
                self._plan = _make_plan(self._config, discover())
            except TerminalError as exc:
                self._refusal = exc
                raise
            if self._plan.missing:
                _log.warning(
                    "owner limits: the host does not allow %s; those defaults are not "
                    "enforced (docs/sandbox.md, 'Limits per owner')",
                    "; ".join(self._plan.missing),
                )
        return self._plan

    def session_cgroup(self, owner: Agent, session_id: str) -> CgroupGroup | None:
        """Make the cgroup of ``owner``'s new session ``session_id`` (and the owner's, at
        its first session); None when no cgroup is used. The caller hands it to the
        provider in the spawn spec, which empties and removes it at teardown.

        Raises:
            TerminalError: ``LIMITS_UNAVAILABLE`` as :meth:`plan`, or when the cgroups
                cannot be made now; ``SERVICE_DISPOSING`` after disposal.
        """
        if self._disposed:
            raise TerminalError("owner limits are disposed", ErrorCode.SERVICE_DISPOSING)
        plan = self.plan()
        if plan is None or not plan.bases:
            return None
        owner_name, owner_group = self._owner_dir(owner, plan)
        name = _UNSAFE.sub("_", session_id)[:64] or "session"
        dirs = [os.path.join(base, owner_name, name) for base in plan.bases.values()]
        try:
            make_dirs(dirs)
        except OSError as exc:
            raise _unavailable(f"cannot make the session's cgroup {exc.filename}: "
                               f"{exc.strerror}") from exc
        group = _group(plan, dirs)
        self._watch(owner, owner_group, group, session_id)
        return group

    def _owner_dir(self, owner: Agent, plan: LimitPlan) -> tuple[str, CgroupGroup]:
        """The owner's cgroup directory name and group, made and limited at its first
        session."""
        known = self._owners.get(owner)
        if known is not None:
            return known
        name = f"o{next(self._numbers)}-{_UNSAFE.sub('_', owner.id)[:40]}"
        dirs = [os.path.join(base, name) for base in plan.bases.values()]
        try:
            make_dirs(dirs)
            _apply_limits(plan, dirs)
        except OSError as exc:
            for directory in dirs:
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
            raise _unavailable(
                f"cannot set up the owner's cgroup {exc.filename}: {exc.strerror}"
            ) from exc
        group = _group(plan, dirs)
        owner.on_dispose(lambda: group.clear(3.0), late=True)
        self._owners[owner] = name, group
        return name, group

    # -- telling the owner ------------------------------------------------------------

    def _watch(
        self, owner: Agent, owner_group: CgroupGroup, group: CgroupGroup, session_id: str
    ) -> None:
        self._watched.add(owner, owner_group, group, session_id)
        if self._watcher is None or self._watcher.done():
            with contextlib.suppress(RuntimeError):  # no running loop: nothing to watch on
                self._watcher = asyncio.get_running_loop().create_task(self._watch_loop())

    async def _watch_loop(self) -> None:
        interval = self._config.watch_interval_ms / 1000
        while self._watched:
            await asyncio.sleep(interval)
            try:
                self.check_counters()
            except Exception:  # a bad read must not stop the owners' notices for good
                _log.exception("owner limits: reading the limit counters failed")

    def check_counters(self) -> None:
        """Read the limit counters that may have moved; notify the owners of what rose,
        and cap or release runaway sessions (:mod:`.limitwatch`)."""
        self._watched.check()

    def _notices(
        self, session_id: str, before: LimitCounts, now: LimitCounts, capped: bool
    ) -> list[Notice]:
        cap = self._config.runaway_cpu_percent if capped else None
        return _notices(self._plan, session_id, before, now, cap)

    async def dispose(self) -> None:
        """Kill what is left in the service's cgroups and remove them all."""
        self._disposed = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
        self._watched.clear()
        await removals_done()
        plan = self._plan
        if plan is not None and plan.bases:
            await _group(plan, list(plan.bases.values())).clear(3.0)


def _make_plan(config: OwnerLimitsConfig, host: CgroupHost) -> LimitPlan:
    """Decide the trees, limits and teardown for ``host``; make the service's directories.

    Raises:
        TerminalError: ``LIMITS_UNAVAILABLE`` naming every required part that is missing.
    """
    require_all = config.cgroups == "require"
    wanted = _wanted_limits(config)
    missing: list[str] = []
    required_missing: list[str] = []
    trees: dict[str, Hierarchy] = {}
    limits: list[_Limit] = []
    for controller, value, explicit in wanted:
        tree = host.serving(controller)
        if value is not None and tree is None:
            what = f"the {controller} controller (neither cgroup v2 nor a v1 hierarchy mounts it)"
            (required_missing if explicit or require_all else missing).append(what)
            continue
        if tree is not None and value is not None:
            trees[tree.mount] = tree
            limits.append(_Limit(controller, value, explicit, tree))
    kill_method, kill_tree = _kill_tree(config, host, trees)
    if kill_tree is not None:
        trees[kill_tree.mount] = kill_tree
    elif require_all or config.kill_with != "auto":
        required_missing.append(f"a cgroup teardown ({config.kill_with}: not mounted)")
    bases: dict[str, str] = {}
    tag = _service_tag()
    for tree in trees.values():
        parent = own_tree_dir(tree, config.parent)
        base = os.path.join(parent, tag)
        controllers = [x.controller for x in limits if x.tree is tree]
        try:
            if tree.version == 2:
                enable_controllers(parent, controllers)
            _sweep_orphans(parent)
            make_dirs([base])
            if tree.version == 2:
                enable_controllers(base, controllers)
            if "cpu" in controllers:
                _write_weight(tree, base, config.base_cpu_weight)
        except OSError as exc:
            if not is_refusal(exc):
                raise
            why = _refusal_text(tree, parent, exc)
            needed = [x for x in limits if x.tree is tree]
            if any(x.explicit for x in needed) or require_all or (
                config.kill_with != "auto" and tree is kill_tree
            ):
                required_missing.append(why)
            else:
                missing.append(why)
            limits = [x for x in limits if x.tree is not tree]
            if tree is kill_tree:
                kill_method, kill_tree = None, None
            continue
        bases[tree.mount] = base
    if required_missing:
        for base in bases.values():
            with contextlib.suppress(OSError):
                os.rmdir(base)
        raise _unavailable("; ".join(required_missing))
    return LimitPlan(
        layout=host.layout,
        bases=bases,
        limits=tuple(limits),
        kill_method=kill_method,
        kill_mount=kill_tree.mount if kill_tree is not None else None,
        missing=tuple(missing),
    )


def _wanted_limits(config: OwnerLimitsConfig) -> list[tuple[str, int | None, bool]]:
    """(controller, value or None for unlimited, explicitly configured) per limit."""
    total = host_memory_bytes()
    memory: int | None
    if config.memory_max == "max":
        memory = None
    elif config.memory_max is None:
        memory = total * DEFAULT_MEMORY_PERCENT // 100 if total else None
    else:
        memory = memory_bytes(config.memory_max, total=total)
    pids = None if config.pids_max == "max" else int(config.pids_max or DEFAULT_PIDS_MAX)
    weight = config.cpu_weight if config.cpu_weight is not None else DEFAULT_CPU_WEIGHT
    return [
        ("memory", memory, config.memory_max not in (None, "max")),
        ("pids", pids, config.pids_max not in (None, "max")),
        ("cpu", weight, config.cpu_weight is not None),
    ]


def _kill_tree(
    config: OwnerLimitsConfig, host: CgroupHost, trees: dict[str, Hierarchy]
) -> tuple[KillMethod | None, Hierarchy | None]:
    """How sessions are emptied, and in which tree."""
    if config.kill_with in ("auto", "cgroup.kill") and host.unified is not None:
        return "cgroup.kill", host.unified
    freezer = host.legacy.get("freezer")
    if config.kill_with in ("auto", "freezer") and freezer is not None:
        return "freezer", freezer
    if config.kill_with == "auto" and trees:
        return "signal", next(iter(trees.values()))
    return None, None


def _apply_limits(plan: LimitPlan, owner_dirs: list[str]) -> None:
    """Write the owner's limits into its directories (one per tree, in plan order)."""
    by_mount = dict(zip(plan.bases, owner_dirs, strict=True))
    for limit in plan.limits:
        assert limit.tree is not None and limit.value is not None
        directory = by_mount[limit.tree.mount]
        for name, text, required in _limit_files(limit):
            path = os.path.join(directory, name)
            if required:
                write_text(path, text)
            elif os.path.exists(path):
                with contextlib.suppress(OSError):
                    write_text(path, text)
    for mount, directory in by_mount.items():
        controllers = [x.controller for x in plan.limits if x.tree and x.tree.mount == mount]
        tree = next((x.tree for x in plan.limits if x.tree and x.tree.mount == mount), None)
        if tree is not None and tree.version == 2:
            enable_controllers(directory, controllers)


def _write_weight(tree: Hierarchy, directory: str, weight: int) -> None:
    """Set a cgroup's CPU weight: ``cpu.weight`` (v2) or ``cpu.shares`` (v1, ×1024/100)."""
    if tree.version == 2:
        write_text(os.path.join(directory, "cpu.weight"), str(weight))
    else:
        write_text(os.path.join(directory, "cpu.shares"), str(max(2, weight * 1024 // 100)))


def _limit_files(limit: _Limit) -> list[tuple[str, str, bool]]:
    """(file, value, required) for one limit. Swap is bounded by the same amount where
    the host has swap accounting, so a hog cannot move its excess to swap instead."""
    assert limit.tree is not None and limit.value is not None
    v2 = limit.tree.version == 2
    value = str(limit.value)
    if limit.controller == "memory":
        if v2:
            return [("memory.max", value, True), ("memory.swap.max", value, False)]
        # memsw (memory + swap) may not be set below the memory limit: set it after.
        return [
            ("memory.limit_in_bytes", value, True),
            ("memory.memsw.limit_in_bytes", value, False),
        ]
    if limit.controller == "pids":
        return [("pids.max", value, True)]
    if v2:
        return [("cpu.weight", value, True)]
    return [("cpu.shares", str(max(2, limit.value * 1024 // 100)), True)]


def _group(plan: LimitPlan, dirs: list[str]) -> CgroupGroup:
    by_mount = dict(zip(plan.bases, dirs, strict=True))
    memory = next((x for x in plan.limits if x.controller == "memory"), None)
    pids = next((x for x in plan.limits if x.controller == "pids"), None)
    cpu = next((x for x in plan.limits if x.controller == "cpu"), None)
    kill_dir = by_mount.get(plan.kill_mount) if plan.kill_mount is not None else None
    return CgroupGroup(
        dirs=tuple(dirs),
        kill_method=plan.kill_method or "signal",
        kill_dir=kill_dir,
        memory_dir=_counter_dir(memory, by_mount),
        pids_dir=_counter_dir(pids, by_mount),
        cpu_dir=_counter_dir(cpu, by_mount),
    )


def _counter_dir(limit: _Limit | None, by_mount: dict[str, str]) -> tuple[int, str] | None:
    if limit is None or limit.tree is None:
        return None
    return limit.tree.version, by_mount[limit.tree.mount]


def _notices(
    plan: LimitPlan | None,
    session_id: str,
    before: LimitCounts,
    now: LimitCounts,
    cpu_cap: int | None = None,
) -> list[Notice]:
    """The ``limit_reached`` notices for counters that rose; ``cpu_cap``: the session is
    held to that share of one CPU as a runaway."""
    held = (
        f"; the session is held to {cpu_cap}% of one CPU until no limit trips in it for "
        f"{CALM_S:.0f} s"
        if cpu_cap is not None
        else ""
    )
    values = {x.controller: x for x in plan.limits} if plan is not None else {}
    notices = []
    killed = now.oom_kills - before.oom_kills
    if killed > 0:
        memory = values.get("memory")
        size = _size(memory.value) if memory is not None and memory.value else "its limit"
        notices.append(Notice(
            kind="limit_reached",
            text=(f"session {session_id}: the kernel killed {killed} process"
                  f"{'es' if killed > 1 else ''} at its owner's memory limit ({size}); "
                  f"the owner's other sessions and the host were not affected{held}"),
            data={"sessionId": session_id, "limit": "memory", "count": killed,
                  "cpuCapPercent": cpu_cap},
        ))
    refused = now.refused_forks - before.refused_forks
    if refused > 0:
        pids = values.get("pids")
        count = f"{pids.value} processes" if pids is not None else "its limit"
        notices.append(Notice(
            kind="limit_reached",
            text=(f"session {session_id}: {refused} fork{'s' if refused > 1 else ''} refused "
                  f"at its owner's process limit ({count}); a runaway can be stopped with "
                  f"terminal_signal or terminal_close{held}"),
            data={"sessionId": session_id, "limit": "pids", "count": refused,
                  "cpuCapPercent": cpu_cap},
        ))
    return notices


def _size(value: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if value >= 1 << shift:
            return f"{value / (1 << shift):.4g} {unit}"
    return f"{value} bytes"


def _unavailable(why: str) -> TerminalError:
    return TerminalError(
        f"owner limits cannot be enforced on this host: {why}. This is the host's setting: "
        "run the harness as root or in a delegated cgroup (systemd-run --scope -p "
        "Delegate=yes, or owner-limits.parent), or set owner-limits.cgroups to 'off' and "
        "the explicit limits to null (docs/sandbox.md, 'Limits per owner')",
        ErrorCode.LIMITS_UNAVAILABLE,
    )


def _refusal_text(tree: Hierarchy, parent: str, exc: OSError) -> str:
    kind = "cgroup v2" if tree.version == 2 else f"cgroup v1 {','.join(sorted(tree.controllers))}"
    why = exc.strerror or str(exc)
    if tree.version == 2 and exc.errno is not None and exc.errno == 16:  # EBUSY
        why += (" (cgroup v2 hands controllers down only from a cgroup without processes: "
                "run the harness in a cgroup of its own and point owner-limits.parent at an "
                "empty one)")
    return f"{kind}: cannot create cgroups in {parent}: {why}"


def _service_tag() -> str:
    """``dsh-<pid>-<start>-<n>``: names this harness by an identity pid reuse cannot fake."""
    start = round(psutil.Process().create_time() * 100)
    return f"{_PREFIX}{os.getpid()}-{start}-{next(_tags)}"


_tags = itertools.count(1)


def _sweep_orphans(parent: str) -> None:
    """Remove the cgroups of harnesses that died without disposing (killed outright):
    kill what is left in them first. A live harness's cgroups are never touched."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        parts = name[len(_PREFIX):].split("-")
        if not name.startswith(_PREFIX) or len(parts) != 3 or not all(p.isdigit() for p in parts):
            continue
        if _alive(int(parts[0]), int(parts[1])):
            continue
        path = os.path.join(parent, name)
        group = CgroupGroup(dirs=(path,), kill_method="signal")
        group.kill_once()
        group.remove()


def _alive(pid: int, start: int) -> bool:
    try:
        return round(psutil.Process(pid).create_time() * 100) == start
    except psutil.Error:
        return False
