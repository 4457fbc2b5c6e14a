"""Process-table helpers shared by the reliability and security tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import time
from collections.abc import Callable, Iterable, Iterator

import psutil

from dsh_terminal_core.sandbox.bwrap import BwrapConfig, BwrapSandbox

from ..helpers import own_descendants

BWRAP_USABLE = BwrapSandbox(BwrapConfig()).available()


def unique_seconds() -> str:
    """A sleep duration no other process on the machine is using: a findable argv tag."""
    return f"{1000 + secrets.randbelow(8000)}.{secrets.randbelow(10**6):06d}"


def with_argv(fragment: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose joined argv contains ``fragment``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            argv = proc.info["cmdline"] or []
            if fragment in " ".join(argv) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def alive(proc: psutil.Process) -> bool:
    """True while ``proc`` (by pid and start time) runs and is not a zombie."""
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def session_members(sid: int) -> list[psutil.Process]:
    """Live processes of POSIX session ``sid``."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (OSError, psutil.Error):
            continue
    return members


def tree(pid: int) -> list[psutil.Process]:
    """``pid`` and its live descendants, plus the live members of its POSIX session."""
    found: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        found[pid] = root
        for child in root.children(recursive=True):
            found[child.pid] = child
        for member in session_members(os.getsid(pid)):
            found.setdefault(member.pid, member)
    except (OSError, psutil.Error):
        pass
    return [proc for proc in found.values() if alive(proc)]


def ignored_signals(pid: int) -> set[int]:
    """Signal numbers ``pid`` ignores (``SigIgn`` in ``/proc/<pid>/status``)."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("SigIgn:"):
                mask = int(line.split()[1], 16)
                return {n for n in range(1, 65) if mask & (1 << (n - 1))}
    return set()


async def until(predicate: Callable[[], bool], timeout: float = 10.0, what: str = "") -> None:
    """Poll ``predicate`` every 20 ms until it holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(0.02)


def wait_gone(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Block until every process in ``procs`` is gone; return the ones still running."""
    deadline = time.monotonic() + timeout
    pending = [p for p in procs if alive(p)]
    while pending and time.monotonic() < deadline:
        time.sleep(0.02)
        pending = [p for p in pending if alive(p)]
    return pending


def kill_now(procs: Iterable[psutil.Process]) -> None:
    """SIGKILL each process that still carries its identity, and wait for it to go."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
    wait_gone(procs, 5.0)


@contextlib.contextmanager
def reaping(fragment: str) -> Iterator[None]:
    """On exit, SIGKILL every process whose argv contains ``fragment`` (test cleanup)."""
    try:
        yield
    finally:
        kill_now(with_argv(fragment))


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def child_counts() -> tuple[int, int]:
    """(live, zombie) descendants of this process."""
    live = zombies = 0
    for child in own_descendants():
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                zombies += 1
            else:
                live += 1
        except psutil.Error:
            continue
    return live, zombies


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``samples`` (``fraction`` in 0..1)."""
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]
