"""Opens that meet a limit of the machine are refused with ``HOST_LIMIT`` (SPEC §24).

For real: a child Python lowers its ``RLIMIT_NOFILE`` (soft and hard, so the provider
cannot raise it back) before it builds a harness with every plugin, then opens sessions
through ``terminal_open`` until they are refused. Every refusal is ``HOST_LIMIT`` naming
the limit and how to raise it — never ``INTERNAL`` or ``SPAWN_FAILED`` — no process of a
refused open is left, the sessions opened before still answer a send with their own
output, and after the owner's dispose nothing of the owner runs.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_terminal_bash.census import shells_of
from dsh_terminal_core.kernel.errors import ErrorCode
from dsh_terminal_core.provider import hostlimits

from ._support import BWRAP_USABLE

CHILD = Path(__file__).with_name("host_limit_child.py")
MODES = [
    "danger-full-access",
    pytest.param(
        "workspace-write",
        marks=pytest.mark.skipif(not BWRAP_USABLE, reason="bubblewrap is not usable here"),
    ),
]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the harness's limits are read from /proc"
)


def _run(limit: int, mode: str, *, batch: int, deep: bool) -> tuple[str, dict[str, Any]]:
    owner = f"host-limit-{secrets.token_hex(4)}"
    argv = [sys.executable, str(CHILD), str(limit), owner, mode, str(batch), "1" if deep else "0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=os.environ.copy())
    assert done.returncode == 0, done.stderr[-3000:]
    return owner, json.loads(done.stdout.strip().splitlines()[-1])


def _check(owner: str, out: dict[str, Any]) -> None:
    assert out["opened"] >= 2, out
    assert out["refusals"], "no open was refused"
    for text in out["refusals"]:
        assert text.startswith(f"error [{ErrorCode.HOST_LIMIT}]: "), text
        assert "RLIMIT_NOFILE" in text and "ulimit -Hn" in text, text
    # No half-made session: the registry lists exactly the opens that succeeded, and
    # every process of the owner is in the POSIX session of one of their shells.
    assert out["listed"] == out["ids"]
    assert out["marked"] >= out["opened"] and out["strays"] == []
    for answer in out["answers"]:
        assert answer["error"] is None, answer
        assert (answer["waitReason"], answer["viewport"]) == (
            "stdin_read",
            f"{answer['token']}\n",
        ), answer
    assert len(out["answers"]) == out["opened"]
    assert out["left_after_dispose"] == []
    assert shells_of(owner) == []


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_opens_at_the_open_file_limit_are_refused_and_the_open_ones_keep_working(
    mode: str,
) -> None:
    # Eight at once: the opens in flight are counted before any of them takes its
    # descriptors, so a burst is refused as cleanly as one open.
    owner, out = _run(128, mode, batch=8, deep=False)
    assert out["limit"] == [128, 128]
    _check(owner, out)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
async def test_an_open_that_runs_into_the_limit_itself_leaves_nothing(mode: str) -> None:
    # Without the headroom the limit bites wherever in an open the last descriptor goes:
    # receiving the master and the pidfd, reading the child's /proc entry, the probe.
    # Consecutive limits move that point through each descriptor an open takes.
    for limit in range(96, 102):
        owner, out = _run(limit, mode, batch=1, deep=True)
        assert out["closed_newest"] == "closed", out
        _check(owner, out)


def test_the_soft_open_file_limit_is_raised_to_the_hard_one_in_a_new_process() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        pytest.skip("needs soft == hard here to lower both in the child")
    lowered = min(hard, 4096)
    code = (
        "import resource, json\n"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({lowered // 2}, {lowered}))\n"
        "from dsh_terminal_core.provider import LocalTerminalProvider, hostlimits\n"
        "LocalTerminalProvider()\n"
        "print(json.dumps([resource.getrlimit(resource.RLIMIT_NOFILE),"
        " hostlimits.child_open_file_limit()]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    limits, child = json.loads(done.stdout)
    assert limits == [lowered, lowered] and child == lowered // 2


def test_each_limit_is_named_with_its_remedy() -> None:
    import errno

    cases = {
        (errno.EMFILE, "pty"): ("RLIMIT_NOFILE", "ulimit -Hn"),
        (errno.ENFILE, "prepare"): ("fs.file-max", "sysctl -w fs.file-max"),
        (errno.ENOSPC, "pty"): ("kernel.pty.max", "sysctl -w kernel.pty.max"),
        (errno.EAGAIN, "pty"): ("kernel.pty.max", "sysctl -w kernel.pty.max"),
        (errno.EAGAIN, "fork"): ("RLIMIT_NPROC", "ulimit -u"),
        (errno.EMFILE, "accept"): ("RLIMIT_NOFILE", "LimitNOFILE="),
    }
    for (code, stage), needles in cases.items():
        error = hostlimits.spawn_limit(code, stage, "/bin/bash")
        assert error is not None and error.code == ErrorCode.HOST_LIMIT, (code, stage)
        for needle in needles:
            assert needle in error.message, (code, stage, error.message)
        assert "keep working" in error.message
    # Not a limit of the machine: a missing program, an unusable directory.
    assert hostlimits.spawn_limit(errno.ENOENT, "exec", "/bin/bash") is None
    assert hostlimits.spawn_limit(errno.EACCES, "exec", "/bin/bash") is None
    assert hostlimits.spawn_limit(errno.ENOSPC, "exec", "/bin/bash") is None
