"""A world for tests: the world agent in its own pid, mount, IPC and UTS namespaces.

``bwrap --unshare-pid --unshare-ipc --unshare-uts --die-with-parent`` around
``dsh-terminal world --stdio`` is a container in all but its image: the world's pids
mean nothing in the harness's ``/proc``, and every fact a result carries was decided
inside it.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import pytest

BWRAP = shutil.which("bwrap")


def world_command(*, sandbox: str = "danger-full-access", loop: str | None = None) -> list[str]:
    """The agent in its namespaces; ``loop="asyncio"`` keeps it off uvloop."""
    chosen = [] if loop is None else ["--setenv", "DSH_TERMINAL_LOOP", loop]
    return [
        BWRAP or "bwrap",
        "--dev-bind", "/", "/",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--die-with-parent",
        "--proc", "/proc",
        "--hostname", "world-ns",
        *chosen,
        sys.executable, "-m", "dsh_terminal_core.cli", "world", "--stdio", "--sandbox", sandbox,
    ]  # fmt: skip


def world_config(**worlds: dict[str, Any]) -> dict[str, Any]:
    """A harness config with the namespace world ``ns`` (and any others given)."""
    return {
        "sandbox-policy": {"mode": "danger-full-access", "workspace_root": os.getcwd()},
        "worlds": {"worlds": {"ns": {"command": world_command()}, **worlds}},
    }


def bwrap_works() -> bool:
    if BWRAP is None:
        return False
    import subprocess

    probe = subprocess.run(
        [BWRAP, "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"],
        capture_output=True,
        timeout=30,
    )
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(not bwrap_works(), reason="needs working bubblewrap")
