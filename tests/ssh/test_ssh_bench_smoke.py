"""The ssh benchmark runs end to end at tiny sizes and reports every row.

Timings are never asserted here: the figures belong to ``bench/ssh_run.py`` itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .sshd import available

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_ssh_benchmark_completes(tmp_path: Path) -> None:
    reason = available()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "ssh.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "ssh_run.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = {row["row"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {
        "ssh_run echo",
        "ssh one-shot (ControlPath)",
        "terminal_send echo (local)",
        "ssh_open, first (new master)",
        "ssh_open, second (reuses master)",
    }
    assert all(row["n"] > 0 and row["p50_ms"] > 0 for row in rows.values())
    assert "second ssh_open / first" in result.stdout
