"""Finding processes by their environment (what the leak checks and the demo rely on)."""

from __future__ import annotations

import os
import subprocess
import uuid

from dsh_terminal_bash.census import shells_of
from dsh_terminal_core.provider.census import processes_with_env


def test_finds_exactly_the_processes_carrying_every_variable() -> None:
    tag = uuid.uuid4().hex
    env = {**os.environ, "CENSUS_TAG": tag, "DSH_SHELL": "1", "DSH_SESSION_ID": f"agent-{tag}"}
    with subprocess.Popen(["sleep", "30"], env=env) as marked, subprocess.Popen(
        ["sleep", "30"], env={**os.environ, "CENSUS_TAG": "other"}
    ) as unmarked:
        try:
            assert processes_with_env({"CENSUS_TAG": tag}) == [marked.pid]
            assert shells_of(f"agent-{tag}") == [marked.pid]
            assert processes_with_env({"CENSUS_TAG": tag, "DSH_SHELL": "0"}) == []
            assert unmarked.pid in processes_with_env({"CENSUS_TAG": "other"})
        finally:
            marked.kill()
            unmarked.kill()
