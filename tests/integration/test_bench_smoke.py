"""The benchmark runs end to end at tiny sizes, reports every scenario and cleans up.

Timings are never asserted here: they belong to ``bench/run.py`` on a quiet machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {
    "open": {"raw", "proofs", "pexpect", "service", "tool"},
    "close": {"raw", "proofs", "pexpect", "service", "tool"},
    "echo": {"raw", "proofs", "pexpect", "service", "tool"},
    "pwd": {"raw", "proofs", "pexpect", "service", "tool"},
    "repl": {"raw", "proofs", "pexpect", "service", "tool"},
    "throughput": {"raw", "pexpect", "service", "tool"},
    "concurrent": {"raw", "proofs", "service", "tool"},
    "idle_memory": {"raw", "proofs", "pexpect", "service", "tool"},
    "records": {"tool"},
    "scale": {"tool"},
    "cpu": {"tool"},
    "mcp": {"tool"},
    "shells": {"service"},
}


def _processes_of(owner: str) -> list[int]:
    needle = f"\0DSH_SESSION_ID={owner}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if needle in b"\0" + handle.read() + b"\0":
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _bench(script: str, *args: str, timeout: float = 300) -> str:
    """Run ``bench/<script>`` with ``args``; its standard output, once it exited 0."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the benchmark reads /proc")
def test_quick_benchmark_completes_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "quick.json"
    stdout = _bench("run.py", "--quick", "--json", str(out), timeout=600)
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["errors"] == [] and report["leaks"] == []
    scenarios = report["scenarios"]
    for scenario, contenders in SCENARIOS.items():
        assert set(scenarios.get(scenario, {})) == contenders, scenario
    for level in ("service", "tool"):
        for scenario in ("echo", "pwd", "repl", "throughput", "concurrent"):
            reasons = scenarios[scenario][level]["wait_reasons"]
            assert set(reasons) == {"stdin_read"}, (scenario, level, reasons)
        assert scenarios["repl"][level]["repl_startup_wait_reason"] == "stdin_read"
    for scenario in ("echo", "pwd", "concurrent"):
        proofs = scenarios[scenario]["proofs"]
        assert set(proofs["wait_reasons"]) == {"stdin_read"}, (scenario, proofs)
        assert 0 <= proofs["retried_sends"] <= sum(proofs["wait_reasons"].values())
    scale = scenarios["scale"]["tool"]
    assert scale["opened"] == scale["sessions"] and scale["wrong"] == 0, scale
    assert set(scale["wait_reasons"]) == {"stdin_read"} and scale["clean"], scale
    targets = {(t["target"], t["level"]) for t in report["targets"]}
    assert len(targets) == 32 and all(t["met"] is not None for t in report["targets"])
    cpu = scenarios["cpu"]["tool"]
    assert all(cpu[c]["wrong"] == 0 for c in ("proofs", "tool", "pexpect")), cpu
    assert cpu["pexpect"]["n"] == cpu["tool"]["n"] and cpu["tool_p50_x_pexpect"]["all_sends"] > 0
    for name, shell in scenarios["shells"]["service"].items():
        assert shell.get("missing") or set(shell["wait_reasons"]) == {"stdin_read"}, name
    records = scenarios["records"]["tool"]
    assert records["recorded_bytes"] > records["pty_bytes"] and records["audit_lines"] > 0
    for key in ("nproc", "cpu_model", "kernel", "python"):
        assert report["machine"][key]
    assert "| target |" in stdout
    assert _processes_of(report["owner"]) == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the benchmark reads /proc")
def test_tool_layer_figure_runs_both_levels_and_leaves_nothing() -> None:
    stdout = _bench("tool_layer.py", *("--rounds", "2", "--block", "3", "--warmup", "1"))
    assert "CPU per send service" in stdout and "tool layer" in stdout
    assert _processes_of("tool-layer") == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the benchmark reads /proc")
def test_send_path_stamps_every_stage_of_every_send_and_leaves_nothing() -> None:
    stdout = _bench("send_path.py", "--sends", "20", "--warmup", "2")
    assert "20 of 20 sends stamped at every stage, {'stdin_read': 20}" in stdout
    rows = [line for line in stdout.splitlines() if line.startswith("| ")][1:]
    stages = {row.split(" | ")[0][2:]: float(row.split(" | ")[1]) for row in rows}
    assert len(stages) == 7 and all(value >= 0 for value in stages.values()), stages
    assert stages["round trip"] >= stages["handling the last piece"] > 0
    assert _processes_of("send-path") == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the benchmark uses a PTY")
def test_read_path_figure_reads_every_byte_with_both_readers() -> None:
    stdout = _bench("read_path.py", "--quick")
    rows = [line for line in stdout.splitlines() if line.startswith("| ")][1:]
    assert [row.split(" | ")[0] for row in rows] == ["| plain reader", "| PtyChannel"]
    for row in rows:
        assert float(row.split(" | ")[1]) > 0, row


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sampler uses ITIMER_PROF")
def test_mcp_profile_splits_both_servers_cpu_by_layer_and_leaves_nothing() -> None:
    pytest.importorskip("mcp")
    stdout = _bench("mcp_profile.py", "--sends", "600")
    for transport in ("stdio", "http"):
        section = stdout.split(f"\n{transport}: server CPU ", 1)[1].split("\n\n", 1)[0]
        rows = {
            line.split(" | ")[0].lstrip("| "): float(line.split(" | ")[1].rstrip(" %"))
            for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| layer")
        }
        # Every send runs the tools and the SDK's dispatch, so both always take samples;
        # the shares are of one whole.
        assert rows.get("the tools (the in-process call)", 0) > 0, section
        assert rows.get("MCP SDK", 0) + rows.get("anyio (for the SDK)", 0) > 0, section
        assert abs(sum(rows.values()) - 100) < 1, section
        assert "without our MCP modules:" in section
    assert _processes_of("bench") == [] and _processes_of("mcp-client") == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the benchmark reads /proc")
def test_scale_floors_drive_every_contender_and_leave_nothing(tmp_path: Path) -> None:
    from dsh_terminal_bash.census import shells_of

    owner = f"floors-smoke-{os.getpid()}"
    out = tmp_path / "floors.json"
    _bench(
        "scale_floors.py",
        *("--sessions", "6", "--sends", "2", "--owner", owner, "--json", str(out)),
    )
    floors = json.loads(out.read_text())["floors"]
    assert [row["contender"] for row in floors] == ["raw", "proofs", "tools"]
    for row in floors:
        assert row["opened"] == 6 and row["send"]["n"] == 12, row
        assert row["send_phase"]["shell_processes"] >= 6, row["send_phase"]
    assert floors[-1]["wrong"] == 0 and floors[-1]["clean"], floors[-1]
    assert shells_of(owner) == []


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the benchmark uses a PTY")
def test_inflight_counts_each_sends_objects_and_leaves_nothing() -> None:
    stdout = _bench("inflight.py", "--sessions", "10")
    assert "10 tool sends in flight" in stdout
    rows = [line for line in stdout.splitlines() if line.startswith("| ")][1:]
    kinds = {row.split(" | ")[0][2:]: float(row.split(" | ")[1]) for row in rows}
    # Each send's own objects are there, one each, and the driver's task with them.
    assert kinds["BashSendOperation"] == kinds["Readiness"] == kinds["Task"] == 1.0, kinds
    assert kinds["coroutine ToolRegistry.call"] == 1.0, kinds
    # No closure is kept per send (a function with its cells), and no per-send token.
    assert not {"function", "cell", "Cancellation", "Remover"} & kinds.keys(), kinds
    assert _processes_of("bench-inflight") == []


def test_line_fidelity_table_shows_what_a_terminal_shows() -> None:
    stdout = _bench("line_fidelity.py", "--mode", "danger-full-access", timeout=180)
    rows = dict(line.strip("| ").split(" | ", 1) for line in stdout.splitlines() if line)
    assert rows["`printf '\\rX 0%%\\r\\rX Done\\r\\r\\n'`"] == '"X Done\\n"'
    assert rows["`stty -echo; cat`, then `abcdé`"] == '"abcdé\\n"'
    assert '"signal": "SIGKILL"' in rows["`kill -KILL $$`: sessionStatus"]
