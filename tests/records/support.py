"""Shared pieces of the records tests: this checkout's plugins, harnesses, cast files."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access

ROOT = Path(__file__).resolve().parents[2]
CORE_PYPROJECT = ROOT / "dsh_terminal_core" / "pyproject.toml"


def entry_points_dir(base: Path) -> Path:
    """A path entry declaring dsh-terminal-core's entry points as this checkout has them.

    An editable install made before the ``recording`` and ``audit`` plugins existed
    lacks their entry points; importlib.metadata takes the first distribution of a name
    on the path, so this one, put first, makes discovery see the checkout's plugins
    (the same list a fresh install registers).
    """
    project = tomllib.loads(CORE_PYPROJECT.read_text())["project"]
    info = base / f"dsh_terminal_core-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
    )
    lines = ["[dsh.plugins]"]
    lines += [f"{name} = {value}" for name, value in project["entry-points"]["dsh.plugins"].items()]
    lines += ["", "[console_scripts]"]
    lines += [f"{name} = {value}" for name, value in project["scripts"].items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return base


def records_config(
    recordings: Path | None = None, audit: Path | None = None, **sections: Any
) -> dict[str, Any]:
    config = full_access(**sections)
    if recordings is not None:
        config["recording"] = {"dir": str(recordings), **config.get("recording", {})}
    if audit is not None:
        config["audit"] = {"file": str(audit)}
    return config


@contextlib.asynccontextmanager
async def records_harness(config: Mapping[str, Any]) -> AsyncIterator[Harness]:
    async with Harness(config=dict(config)) as h:
        yield h


def cast_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.cast"))


def only_cast(directory: Path) -> Path:
    found = cast_files(directory)
    assert len(found) == 1, found
    return found[0]


def read_cast(path: Path) -> tuple[dict[str, Any], list[list[Any]]]:
    """The header and the events of an asciicast v2 file (every line must be JSON)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    return header, [json.loads(line) for line in lines[1:]]


def events_of(events: list[list[Any]], code: str) -> list[str]:
    return [text for _, kind, text in events if kind == code]


def asciinema_cat(path: Path) -> str:
    """What the real asciinema client prints for ``path`` (``asciinema cat``)."""
    asciinema = Path(sys.executable).parent / "asciinema"
    assert asciinema.exists(), "asciinema is a test need (requirements-dev.txt)"
    run = subprocess.run(
        [str(asciinema), "cat", str(path)],
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal: it prints without raw mode
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")
    return run.stdout.decode("utf-8")


@contextlib.contextmanager
def tmpfs(directory: Path, *options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``directory`` (root only), unmounted at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    opts = ",".join(options) or "size=64k"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True, timeout=30)
