"""Finding processes by their environment (what the leak checks and the demo rely on)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

from dsh_terminal_bash.census import shells_of
from dsh_terminal_core.provider.census import processes_with_env

# Says "ready" once it runs: a process that has only just been exec'd can show an empty
# environment for a moment (the kernel sets it up after the new program's memory exists),
# and on a loaded machine a census can land in that moment.
_READY_THEN_WAIT = [sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(30)"]


def _started(env: dict[str, str]) -> subprocess.Popen[str]:
    child = subprocess.Popen(_READY_THEN_WAIT, env=env, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    return child


def test_finds_exactly_the_processes_carrying_every_variable() -> None:
    tag = uuid.uuid4().hex
    env = {**os.environ, "CENSUS_TAG": tag, "DSH_SHELL": "1", "DSH_SESSION_ID": f"agent-{tag}"}
    with _started(env) as marked, _started({**os.environ, "CENSUS_TAG": "other"}) as unmarked:
        try:
            assert processes_with_env({"CENSUS_TAG": tag}) == [marked.pid]
            assert shells_of(f"agent-{tag}") == [marked.pid]
            assert processes_with_env({"CENSUS_TAG": tag, "DSH_SHELL": "0"}) == []
            assert unmarked.pid in processes_with_env({"CENSUS_TAG": "other"})
        finally:
            marked.kill()
            unmarked.kill()
