"""Shared pieces of the owner-limits tests and benchmark: the host's trees, an outer
safety cgroup of the test's own, and what a harness left in the cgroup trees."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator

from dsh_terminal_core.provider.cgroupfs import discover, read_text, remove_tree, write_text


def cgroup_reason() -> str | None:
    """Why the owner-limits tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "the tests make cgroups, which needs root (or a delegated tree)"
    host = discover()
    if host.serving("memory") is None or host.serving("pids") is None:
        return f"no memory or pids controller is mounted (layout {host.layout})"
    return None


def trees() -> list[str]:
    """The harness's own cgroup directory in every tree the limits may use."""
    host = discover()
    found = {tree.mount: tree.own for tree in host.legacy.values()}
    if host.unified is not None:
        found[host.unified.mount] = host.unified.own
    return list(found.values())


@contextlib.contextmanager
def outer_limit(memory: int, pids: int) -> Iterator[str]:
    """A cgroup of the test's own below this process's cgroup in every tree, holding
    ``memory`` bytes and ``pids`` processes: whatever the harness under test does, its
    shells stay inside. Yields its path relative to the own cgroup (``parent``)."""
    name = f"dsh-test-outer-{os.getpid()}-{secrets.token_hex(3)}"
    made = []
    try:
        for own in trees():
            path = os.path.join(own, name)
            os.mkdir(path)
            made.append(path)
            if os.path.exists(os.path.join(path, "memory.limit_in_bytes")):
                write_text(os.path.join(path, "memory.limit_in_bytes"), str(memory))
            if os.path.exists(os.path.join(path, "memory.max")):
                write_text(os.path.join(path, "memory.max"), str(memory))
            if os.path.exists(os.path.join(path, "pids.max")):
                write_text(os.path.join(path, "pids.max"), str(pids))
        yield name
    finally:
        for path in made:
            kill_everything_in(path)
            remove_tree(path)


def kill_everything_in(directory: str) -> None:
    """SIGKILL every process below ``directory`` (the safety net's own last resort)."""
    for root, _dirs, files in os.walk(directory):
        if "cgroup.procs" in files:
            for word in (read_text(os.path.join(root, "cgroup.procs")) or "").split():
                with contextlib.suppress(OSError):
                    os.kill(int(word), 9)


def harness_dirs(parent: str | None = None) -> list[str]:
    """Every ``dsh-<pid>-...`` cgroup this process's harnesses made (and left)."""
    mine = f"dsh-{os.getpid()}-"
    found = []
    for own in trees():
        base = os.path.join(own, parent) if parent else own
        with contextlib.suppress(OSError):
            found += [os.path.join(base, n) for n in os.listdir(base) if n.startswith(mine)]
    return found
