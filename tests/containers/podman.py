"""Real containers for the tests: a Debian base, the repository's two images, podman.

The base is built from Debian's packages (``mmdebstrap --variant=minbase``) and kept as
a tarball in a cache directory, so a machine builds it once; both images are built from
the repository's own Dockerfiles (``--build-arg BASE=...``) with the network off,
installing from a wheelhouse ``pip wheel`` made on this host. Every tag carries a hash
of what went into it, so a run whose sources did not change reuses the images, and two
runs on one machine never build over each other (a file lock serialises the builds).

Everything podman runs here goes through a ``containers.conf`` of the tests' own
(``CONTAINERS_CONF``): the ``runc`` runtime (``crun`` refuses a hybrid cgroup layout)
and default ulimits no higher than this process's own hard limits (podman's defaults
need ``CAP_SYS_RESOURCE``, which an unprivileged or nested host lacks).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
PODMAN = shutil.which("podman")
MMDEBSTRAP = shutil.which("mmdebstrap")
#: What the base holds: Python with venv for the images' virtual environment, bash for
#: the shells, procps for `top` in the screen test. No bubblewrap: an unprivileged
#: container cannot use it, and the world's own default (danger-full-access) applies.
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "bash", "procps")
DISTRIBUTIONS = ("dsh_terminal_core", "dsh_terminal_bash", "dsh_tool_terminal", "dsh_pty_session")
WORKLOAD_DOCKERFILE = ROOT / "deploy" / "worlds" / "Dockerfile.workload"
SERVER_DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SOCKET = "/run/dsh/world.sock"
BUILD_TIMEOUT_S = 1800


def cache_dir() -> Path:
    """``DSH_TEST_CACHE``, else ``$XDG_CACHE_HOME/dsh-terminal-tests`` (~/.cache)."""
    explicit = os.environ.get("DSH_TEST_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "dsh-terminal-tests"


@functools.cache
def runtime_cwd() -> str:
    """Where the tests run podman: a container's conmon writes an empty file ``oom`` into
    the working directory of the ``podman run`` (``restart``, ``kube play``) that started
    it when the container OOM-kills a process (podman 4.3, seen here) — in the repository,
    had they run there."""
    where = cache_dir() / "podman-cwd"
    where.mkdir(parents=True, exist_ok=True)
    return str(where)


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    """Run podman with the tests' containers.conf; its stdout, stripped."""
    assert PODMAN is not None
    done = subprocess.run(
        [PODMAN, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=runtime_cwd(),
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout.strip()


def podman_ok(*args: str, timeout: float = 120) -> bool:
    """Whether podman ``args`` exits 0 (``healthcheck run`` says healthy by that alone)."""
    assert PODMAN is not None
    done = subprocess.run(
        [PODMAN, *args], capture_output=True, timeout=timeout, check=False, cwd=runtime_cwd()
    )
    return done.returncode == 0


def write_containers_conf(path: Path) -> None:
    """``runc``, and ulimits this process may set (its own hard limits, bounded)."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if nofile == resource.RLIM_INFINITY or nofile > 65536:
        nofile = 65536
    runtime = 'runtime = "runc"\n' if shutil.which("runc") else ""
    path.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc=4096:4096"]\n'
        f"[engine]\n{runtime}"
    )


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    """One builder at a time on this machine (two runs share podman's image store)."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _digest(paths: Sequence[Path], extra: str = "") -> str:
    """A hash of the files under ``paths`` (sources only) and ``extra``."""
    sha = hashlib.sha256(extra.encode())
    for top in paths:
        files = [top] if top.is_file() else sorted(top.rglob("*"))
        for path in files:
            parts = set(path.parts)
            if (
                not path.is_file()
                or "__pycache__" in parts
                or "build" in parts
                or any(part.endswith(".egg-info") for part in parts)
            ):
                continue
            sha.update(str(path.relative_to(ROOT)).encode())
            sha.update(path.read_bytes())
    return sha.hexdigest()[:16]


def _exists(tag: str) -> bool:
    return podman_ok("image", "exists", tag, timeout=60)


@attrs.define
class Images:
    """The tags the tests run, and how long each took to make in this run (0: reused)."""

    base: str
    workload: str
    server: str
    seconds: dict[str, float] = attrs.field(factory=dict)


def build_base(seconds: dict[str, float]) -> str:
    """The Debian base: mmdebstrap's tarball (cached), imported into podman once."""
    tag = f"localhost/dsh-test-base:{BASE_SUITE}-{_digest([], ','.join(BASE_PACKAGES))}"
    with _locked("base"):
        if _exists(tag):
            return tag
        tarball = cache_dir() / f"base-{tag.rsplit(':', 1)[1]}.tar"
        if not tarball.exists():
            if MMDEBSTRAP is None:
                pytest.skip("mmdebstrap is missing and no base is cached (install.sh --test)")
            started = time.monotonic()
            partial = tarball.with_suffix(".partial.tar")
            subprocess.run(
                [
                    MMDEBSTRAP,
                    "--quiet",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    BASE_SUITE,
                    str(partial),
                ],
                check=True,
                timeout=BUILD_TIMEOUT_S,
                capture_output=True,
            )
            partial.rename(tarball)
            seconds["mmdebstrap"] = time.monotonic() - started
        started = time.monotonic()
        podman("import", str(tarball), tag, timeout=600)
        seconds["import"] = time.monotonic() - started
    return tag


def _wheelhouse(directory: Path, seconds: dict[str, float]) -> Path:
    """Every wheel the images install, made here with this host's pip and its index."""
    started = time.monotonic()
    wheels = directory / "wheels"
    subprocess.run(
        [
            sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
            "--wheel-dir", str(wheels),
            f"{ROOT / 'dsh_terminal_core'}[mcp,world]",
            *(str(ROOT / name) for name in DISTRIBUTIONS[1:]),
            "setuptools>=77",
        ],
        check=True,
        timeout=BUILD_TIMEOUT_S,
        capture_output=True,
    )  # fmt: skip
    seconds["wheels"] = time.monotonic() - started
    return wheels


#: Images of earlier sources are removed once this old: a run still using one (another
#: worktree's, started earlier) has long finished by then.
STALE_S = 6 * 3600


def _prune(repository: str, keep: str) -> None:
    """Remove this repository's other tags built more than STALE_S ago (best effort)."""
    import json

    listed = podman(
        "images", "--format", "json", "--filter", f"reference={repository}", check=False
    )
    try:
        rows = json.loads(listed or "[]")
    except ValueError:
        return
    for row in rows:
        names = [name for name in row.get("Names") or [] if name != keep]
        if names and time.time() - float(row.get("Created") or time.time()) > STALE_S:
            podman("rmi", *names, check=False)


def build_images(scratch: Path) -> Images:
    """The base and both images, built only when their inputs changed."""
    seconds: dict[str, float] = {}
    base = build_base(seconds)
    sources = [ROOT / name for name in DISTRIBUTIONS] + [ROOT / ".dockerignore"]
    workload = f"localhost/dsh-test-workload:{_digest([*sources, WORKLOAD_DOCKERFILE], base)}"
    server = f"localhost/dsh-test-server:{_digest([*sources, SERVER_DOCKERFILE], base)}"
    with _locked("images"):
        missing = [(tag, f) for tag, f in ((workload, WORKLOAD_DOCKERFILE), (server, SERVER_DOCKERFILE))
                   if not _exists(tag)]  # fmt: skip
        if missing:
            wheels = _wheelhouse(scratch, seconds)
            for tag, dockerfile in missing:
                started = time.monotonic()
                podman(
                    "build", "--network=none", "--quiet",
                    "-f", str(dockerfile),
                    "--build-arg", f"BASE={base}",
                    "--build-arg", "PIP_OPTIONS=--no-index --find-links /wheels",
                    "-v", f"{wheels}:/wheels:ro",
                    "-t", tag,
                    str(ROOT),
                    timeout=BUILD_TIMEOUT_S,
                )  # fmt: skip
                seconds[dockerfile.name] = time.monotonic() - started
                _prune(tag.rsplit(":", 1)[0], tag)
    return Images(base=base, workload=workload, server=server, seconds=seconds)


def unique(prefix: str) -> str:
    """A container or pod name no other run on this machine uses."""
    return f"dsh-t-{prefix}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def container(image: str, *options: str, name: str | None = None) -> Iterator[str]:
    """A detached container of ``image``, removed (killed) on the way out."""
    name = name or unique("c")
    podman("run", "-d", "--name", name, *options, image, timeout=120)
    try:
        yield name
    finally:
        podman("rm", "-f", "-t", "0", name, check=False, timeout=120)


def wait_for_daemon(name: str, timeout_s: float = 60, *, starts: int = 1) -> None:
    """Until the world daemon in ``name`` listens (its log says so) for the ``starts``-th
    time: a restarted container's log still holds every earlier start's line."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert PODMAN is not None
        logs = subprocess.run(
            [PODMAN, "logs", name], capture_output=True, text=True, timeout=60, check=False
        )
        if (logs.stdout + logs.stderr).count("listening on") >= starts:
            return
        time.sleep(0.1)
    raise AssertionError(f"the world daemon in {name} did not start: {logs.stderr[-800:]}")


def exec_command(name: str) -> list[str]:
    """The world command a user writes for ``docker exec -i``, with podman."""
    assert PODMAN is not None
    return [PODMAN, "exec", "-i", name, "dsh-terminal", "world", "--stdio", "--socket", SOCKET]


def exec_world(name: str, key: str, **extra: Any) -> dict[str, Any]:
    """A ``worlds`` entry reaching ``name``'s daemon through the exec relay."""
    return {"command": exec_command(name), "key": key, **extra}


def state_command(name: str) -> list[str]:
    """What the container runtime says became of ``name`` (for the worlds' ``state``)."""
    assert PODMAN is not None
    return [
        PODMAN, "inspect", "--format",
        "{{.State.Status}} oomkilled={{.State.OOMKilled}} exit={{.State.ExitCode}}", name,
    ]  # fmt: skip


def podman_runs(image: str) -> str | None:
    """None when podman runs a container of ``image`` here, else why not."""
    assert PODMAN is not None
    probe = subprocess.run(
        [PODMAN, "run", "--rm", "--network=none", image, "true"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if probe.returncode == 0:
        return None
    return f"podman cannot run a container here: {probe.stderr.strip()[-400:]}"
