"""Suite-wide guards: every test proves it left no process and no terminal fd behind, and
the host's ``/tmp`` as shared as it found it."""

from __future__ import annotations

import contextlib
import gc
import os
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest

from dsh_terminal_bash.census import shells_marked
from dsh_terminal_core.provider.forkclient import server_script

# Shells inherit this from the test process (it is neither DSH_* nor credential-shaped), so
# the leak check counts only shells started by this run, not by another run on the machine.
RUN_MARKER = f"TERMINAL_SUITE_RUN={uuid.uuid4().hex}"
os.environ["TERMINAL_SUITE_RUN"] = RUN_MARKER.split("=", 1)[1]


def _terminal_fds() -> set[str]:
    """Open fds of this process that are PTY masters or pidfds (what a session holds)."""
    found: set[str] = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target in ("/dev/ptmx", "anon_inode:[pidfd]") or target.startswith("/dev/pts/"):
            found.add(f"{name}->{target}")
    return found


_FORK_SERVER = str(server_script())


def _live_descendants() -> set[tuple[int, float]]:
    """Live processes under this one, except the fork server that lives as long as it."""
    alive: set[tuple[int, float]] = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE and _FORK_SERVER not in child.cmdline():
                alive.add((child.pid, child.create_time()))
        except psutil.Error:
            continue
    return alive


def _dsh_shells() -> set[int]:
    """Processes of this run that carry the bash backend's DSH_SHELL=1 marker."""
    name, value = RUN_MARKER.split("=", 1)
    return set(shells_marked({name: value}))


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The cyclic garbage collector off for the test: what it frees, refcounting did."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.fixture(autouse=True)
def no_leaks() -> Iterator[None]:
    """Fail the test if it leaves a live child process, a DSH shell or a terminal fd."""
    children_before = _live_descendants()
    shells_before = _dsh_shells()
    fds_before = _terminal_fds()
    yield
    deadline = time.monotonic() + 5.0
    while True:
        new_children = _live_descendants() - children_before
        new_shells = _dsh_shells() - shells_before
        new_fds = _terminal_fds() - fds_before
        if not (new_children or new_shells or new_fds) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for pid, _ in new_children:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
    assert not new_children, f"test left child processes running: {sorted(new_children)}"
    assert not new_shells, f"test left DSH shells running: {sorted(new_shells)}"
    assert not new_fds, f"test left terminal fds open: {sorted(new_fds)}"


SHARED_TMP = tempfile.gettempdir()
#: What a shared temporary directory's mode is: everyone may create, only owners delete.
SHARED_TMP_MODE = 0o1777
_last_kept: list[str] = ["the start of the run"]


def _tmp_mode_kept(during: str) -> None:
    """Fail, naming ``during``, if ``/tmp``'s mode is not 1777 any more; put it back first.

    A ``/tmp`` closed to others (once seen as ``drwx------`` after a whole run) fails every
    later test that runs a sandbox or another user's process there, far from the cause;
    restoring it keeps the rest of the run meaningful.
    """
    mode = stat.S_IMODE(os.stat(SHARED_TMP).st_mode)
    if mode == SHARED_TMP_MODE:
        return
    try:
        os.chmod(SHARED_TMP, SHARED_TMP_MODE)
        restored = f"restored to {SHARED_TMP_MODE:o}"
    except OSError as exc:
        restored = f"NOT restored ({exc.strerror}): later tests may fail for it"
    pytest.fail(f"{SHARED_TMP} became mode {mode:o} {during}; {restored}", pytrace=False)


@pytest.fixture(autouse=True)
def shared_tmp_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test during which ``/tmp`` stopped being mode 1777 (one ``stat`` on each
    side); a change between tests (a wider fixture's teardown) is named at the next."""
    _tmp_mode_kept(f"after {_last_kept[0]}, before {request.node.nodeid} started")
    yield
    try:
        _tmp_mode_kept(f"during {request.node.nodeid}")
    finally:
        _last_kept[0] = request.node.nodeid


#: Where the suite runs (the repository), and what a test may add there: tool caches
#: (dot entries) and the directories ``.gitignore`` names for test output.
RUN_DIR = os.getcwd()
RUN_DIR_OUTPUT = frozenset({"test-artifacts", "site", "build", "dist"})


def _run_dir_entries() -> set[str]:
    return {
        name
        for name in os.listdir(RUN_DIR)
        if not name.startswith(".") and name not in RUN_DIR_OUTPUT
    }


@pytest.fixture(autouse=True)
def run_dir_kept(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that left a new entry where the suite runs (one ``listdir`` on each
    side): an empty ``oom`` once appeared at the repository's top level mid-run, from a
    shell redirection in a terminal opened there, and nothing said which test made it."""
    before = _run_dir_entries()
    yield
    added = _run_dir_entries() - before
    if added:
        pytest.fail(
            f"{request.node.nodeid} left {sorted(added)} in {RUN_DIR}", pytrace=False
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a world run (``DSH_TEST_WORLD``), skip what reads the local backend or /proc."""
    if not os.environ.get("DSH_TEST_WORLD"):
        return
    skip = pytest.mark.skip(reason="reads the local backend or the shell's /proc (local_only)")
    for item in items:
        if item.get_closest_marker("local_only"):
            item.add_marker(skip)
