"""Where this host keeps its cgroups, and the few file operations the limits need.

A Linux host mounts its cgroups in one of three layouts: the unified hierarchy alone
(cgroup v2: every controller in one tree), the legacy hierarchies alone (cgroup v1: one
tree per controller, ``memory``, ``pids``, ``cpu``, ``freezer`` ...), or both (hybrid:
the v1 trees hold the controllers and an empty unified tree tracks processes, which is
what this project's test machine has). :func:`discover` reads the mounts
(``/proc/self/mountinfo``) and this process's place in each tree (``/proc/self/cgroup``)
and says, per controller, which tree serves it — the unified one where it offers the
controller, else the v1 tree bound to it.

The harness nests everything it makes under its own cgroup (or a configured parent), so
whatever limits already bound the harness still bound its shells.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Mapping

import attrs

__all__ = [
    "CONTROLLERS",
    "CgroupHost",
    "Hierarchy",
    "discover",
    "read_counter",
    "read_text",
    "remove_tree",
    "write_text",
]

CONTROLLERS = ("memory", "pids", "cpu")
"""The controllers an owner's limits use: memory, process count, CPU weight."""


@attrs.frozen
class Hierarchy:
    """One mounted cgroup tree as this process sees it.

    ``version`` is 1 or 2; ``mount`` the mount point; ``own`` the directory of this
    process's cgroup in it; ``controllers`` the controllers it serves (v1: those bound to
    the mount; v2: those ``cgroup.controllers`` offers at ``own``).
    """

    version: int
    mount: str
    own: str
    controllers: frozenset[str]

    def at(self, cgroup: str) -> str:
        """The directory of ``cgroup`` (a path as ``/proc/self/cgroup`` writes it)."""
        return os.path.join(self.mount, cgroup.lstrip("/"))


@attrs.frozen
class CgroupHost:
    """The trees of this host: the unified one (if mounted) and the v1 one per controller."""

    unified: Hierarchy | None
    legacy: Mapping[str, Hierarchy]

    def serving(self, controller: str) -> Hierarchy | None:
        """The tree that serves ``controller``: the unified one if it offers it, else v1."""
        if self.unified is not None and controller in self.unified.controllers:
            return self.unified
        return self.legacy.get(controller)

    @property
    def layout(self) -> str:
        """``"v2"``, ``"v1"``, ``"hybrid"`` or ``"none"``: how the host mounts its cgroups."""
        if self.unified is not None:
            return "hybrid" if self.legacy else "v2"
        return "v1" if self.legacy else "none"


def discover(
    mountinfo: str = "/proc/self/mountinfo", membership: str = "/proc/self/cgroup"
) -> CgroupHost:
    """Read the host's cgroup layout; a host without cgroups gives an empty one."""
    own = _membership(membership)
    known = _known_controllers()
    unified: Hierarchy | None = None
    legacy: dict[str, Hierarchy] = {}
    for fstype, mount, root, options in _cgroup_mounts(mountinfo):
        if fstype == "cgroup2":
            path = own.get("")
            if unified is not None or path is None:
                continue
            directory = _inside(mount, root, path)
            if directory is None:
                continue
            offered = read_text(os.path.join(directory, "cgroup.controllers")) or ""
            unified = Hierarchy(2, mount, directory, frozenset(offered.split()))
            continue
        bound = frozenset(options) & frozenset((*CONTROLLERS, "freezer"))
        key = ",".join(sorted(c for c in options if c in known))
        path = own.get(key)
        if not bound or path is None:
            continue
        directory = _inside(mount, root, path)
        if directory is None:
            continue
        tree = Hierarchy(1, mount, directory, bound)
        for controller in bound:
            legacy.setdefault(controller, tree)
    return CgroupHost(unified, legacy)


def _known_controllers() -> frozenset[str]:
    """Every controller this kernel has (``/proc/cgroups``), to tell them from mount options."""
    lines = (read_text("/proc/cgroups") or "").splitlines()
    return frozenset(line.split()[0] for line in lines if line and not line.startswith("#"))


def _membership(path: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {sorted controllers joined by commas: cgroup path}; the
    unified tree's key is the empty string."""
    found: dict[str, str] = {}
    for line in (read_text(path) or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, cgroup = parts
        names = [c for c in controllers.split(",") if c and not c.startswith("name=")]
        if controllers and not names:
            continue  # a named hierarchy (name=systemd) serves no controller
        found[",".join(sorted(names))] = cgroup
    return found


def _cgroup_mounts(path: str) -> Iterable[tuple[str, str, str, list[str]]]:
    """(fstype, mount point, root inside the tree, super options) of each cgroup mount."""
    for line in (read_text(path) or "").splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        yield tail[0], _unescape(fields[4]), _unescape(fields[3]), tail[2].split(",")


def _inside(mount: str, root: str, cgroup: str) -> str | None:
    """The directory of ``cgroup`` under a mount of the tree's ``root``; None when the
    mount does not show it (a container that mounts only part of the tree)."""
    if root == "/":
        return os.path.join(mount, cgroup.lstrip("/"))
    if cgroup == root or cgroup.startswith(root.rstrip("/") + "/"):
        return os.path.join(mount, cgroup[len(root) :].lstrip("/"))
    return None


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace(
        "\\134", "\\"
    )


def read_text(path: str) -> str | None:
    """The file's text, None when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def write_text(path: str, text: str) -> None:
    """Write ``text`` in one ``write`` (cgroup files take one value per write).

    Raises:
        OSError: as the kernel refused it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def read_counter(path: str, key: str) -> int:
    """The value of ``key`` in a flat-keyed file (``memory.events``, ``pids.events``,
    ``memory.oom_control``); 0 when the file or the key is absent."""
    for line in (read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            with contextlib.suppress(ValueError):
                return int(value)
    return 0


def remove_tree(directory: str) -> bool:
    """Remove a cgroup directory and the cgroups below it, deepest first; True when gone.

    Cgroup directories are removed with ``rmdir`` (their files are not real files); one
    that still holds a process stays (``EBUSY``).
    """
    if not os.path.isdir(directory):
        return True
    for entry in _subdirectories(directory):
        remove_tree(entry)
    try:
        os.rmdir(directory)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return True
        return False
    return True


def _subdirectories(directory: str) -> list[str]:
    try:
        with os.scandir(directory) as entries:
            return [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
