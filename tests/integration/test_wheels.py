"""Each distribution is a real package: built as a wheel, installed alone, it works.

The wheels are built once from this checkout; each scenario installs a chosen subset
into a fresh virtual environment with ``--no-index`` (dependencies come from a
wheelhouse that pip fills from its usual index and cache, once per session) and drives
it from a script run in a scratch directory, so nothing from this checkout is
importable there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = {
    "dsh-terminal-core": ROOT / "dsh_terminal_core",
    "dsh-terminal-bash": ROOT / "dsh_terminal_bash",
    "dsh-tool-terminal": ROOT / "dsh_tool_terminal",
    "dsh-pty-session": ROOT / "dsh_pty_session",
}
URL = "https://github.com/dsh-terminal/dsh-terminal-python"

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 600) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheels")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(out),
            *map(str, DISTRIBUTIONS.values()),
        ]
    )
    return out


@pytest.fixture(scope="module")
def wheelhouse(wheels: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wheels of every dependency the four distributions declare (not of the four)."""
    out = tmp_path_factory.mktemp("deps")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--wheel-dir",
            str(out),
            "--find-links",
            str(wheels),
            *map(str, sorted(wheels.glob("*.whl"))),
        ]
    )
    for built in wheels.glob("*.whl"):
        (out / built.name).unlink(missing_ok=True)
    return out


def _fresh_env(where: Path, wheels: Path, wheelhouse: Path, *names: str) -> Path:
    # No pip inside (bootstrapping it is the slow part of a venv); this pip installs there.
    _run([sys.executable, "-m", "venv", "--without-pip", str(where)])
    python = where / "bin" / "python"
    install = ["install", "--quiet", "--no-index", "--find-links", str(wheels)]
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            *install,
            "--find-links",
            str(wheelhouse),
            *names,
        ]
    )
    return python


def _drive(python: Path, scratch: Path, body: str) -> str:
    script = scratch / "drive.py"
    script.write_text(
        "import asyncio, importlib.util\n"
        "from dsh_terminal_core.harness import Harness\n"
        "CONFIG = {'sandbox-policy': {'mode': 'danger-full-access'}}\n"
        "async def main():\n" + textwrap.indent(textwrap.dedent(body), "    ") + "\n"
        "asyncio.run(main())\n"
    )
    return _run([str(python), str(script)], cwd=scratch, timeout=120)


def test_every_wheel_carries_license_urls_classifiers_and_readme(wheels: Path) -> None:
    found = sorted(wheels.glob("*.whl"))
    assert len(found) == len(DISTRIBUTIONS)
    license_text = (ROOT / "LICENSE").read_text()
    for wheel in found:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
            text = archive.read(metadata).decode()
            [licence] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
            assert archive.read(licence).decode() == license_text
        header, _, description = text.partition("\n\n")
        fields = [line.split(": ", 1) for line in header.splitlines() if ": " in line]
        values: dict[str, list[str]] = {}
        for key, value in fields:
            values.setdefault(key, []).append(value)
        name = values["Name"][0]
        assert values["License-Expression"] == ["MIT"], name
        assert values["Requires-Python"] == [">=3.11"], name
        assert f"Homepage, {URL}" in values["Project-URL"], name
        assert any(u.startswith("Source, ") for u in values["Project-URL"]), name
        assert "Operating System :: POSIX :: Linux" in values["Classifier"], name
        assert "Typing :: Typed" in values["Classifier"], name
        assert values["Description-Content-Type"] == ["text/markdown"], name
        own_readme = (DISTRIBUTIONS[name] / "README.md").read_text()
        assert description.strip() == own_readme.strip(), name


def test_core_and_bash_alone_drive_the_registry(
    wheels: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    python = _fresh_env(
        tmp_path / "env", wheels, wheelhouse, "dsh-terminal-core", "dsh-terminal-bash"
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = _drive(
        python,
        scratch,
        """
        from dsh_terminal_core.terminals import SendRequest, SpawnRequest
        assert importlib.util.find_spec("dsh_tool_terminal") is None
        assert importlib.util.find_spec("dsh_pty_session") is None
        async with Harness(config=CONFIG) as h:
            assert h.ctx.terminals.list_backends() == ["shell"]
            assert sorted(s["name"] for s in h.tool_schemas()) == ["job_kill", "job_output"]
            agent = h.create_agent("a")
            opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
            op = h.ctx.terminals.start_send(
                agent, opened.session_id, SendRequest(text="echo from-a-wheel")
            )
            result = await op.done
            assert result.viewport == "from-a-wheel\\n", result
            assert (str(result.wait_reason), result.exit_code) == ("stdin_read", 0)
            assert await h.ctx.terminals.kill(agent, opened.session_id, "done") is True
            assert h.ctx.terminals.list(agent) == []
        print("core+bash ok")
        """,
    )
    assert out.strip() == "core+bash ok"


def test_facade_without_the_terminal_tools_drives_pty_open(
    wheels: Path, wheelhouse: Path, tmp_path: Path
) -> None:
    python = _fresh_env(
        tmp_path / "env",
        wheels,
        wheelhouse,
        "dsh-terminal-core",
        "dsh-terminal-bash",
        "dsh-pty-session",
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    out = _drive(
        python,
        scratch,
        """
        assert importlib.util.find_spec("dsh_tool_terminal") is None
        async with Harness(config=CONFIG) as h:
            names = {s["name"] for s in h.tool_schemas()}
            assert {"pty_open", "pty_send", "pty_tail", "pty_close"} <= names
            assert not any(n.startswith("terminal_") for n in names), names
            agent = h.create_agent("a")
            opened = await h.call_tool(agent, "pty_open", {"command": "echo facade-from-a-wheel"})
            assert not opened.is_error, opened.text
            sid = opened.value["sessionId"]
            sent = await h.call_tool(agent, "pty_send", {"id": sid, "data": "echo second"})
            assert not sent.is_error, sent.text
            tail = await h.call_tool(agent, "pty_tail", {"id": sid})
            seen = opened.value["initialOutput"] + sent.value["delta"] + tail.value["text"]
            assert "facade-from-a-wheel" in seen and "second" in seen, seen
            closed = await h.call_tool(agent, "pty_close", {"id": sid})
            assert closed.value == {"closed": True}
        print("facade ok")
        """,
    )
    assert out.strip() == "facade ok"
