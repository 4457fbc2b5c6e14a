"""``dsh-terminal mcp`` used from LangChain's ``langchain-mcp-adapters``, over stdio and HTTP.

The adapters (0.3.x) pin ``mcp<2`` while our ``[mcp]`` extra needs ``mcp>=2``, so they
live in an environment of their own, ``.venv-langchain`` (built by
``scripts/install.sh --test``), and talk to our server as a separate process, exactly as
a LangChain application would. Each test runs ``langchain_driver.py`` under that
environment's Python and asserts on the JSON it prints. When the environment is missing
(its install failed, e.g. without network) the tests skip and say so.

What is pinned here (SPEC §25, issue 35):

- with ``client.session()`` + ``load_mcp_tools(session)`` the whole flow works over
  stdio and HTTP: open, send, read, list, a background job and its output, a tool error
  the model can read, close;
- every tool's schema converts in LangChain (``tool_call_schema``, OpenAI function
  format, and OpenAI strict format) without an exception;
- the adapter's default (``get_tools()`` without a session) opens a new MCP session per
  call. Over stdio that is a new server per call, so ``terminal_send`` after
  ``terminal_open`` answers ``NO_SESSION`` — expected, and why docs/mcp.md tells
  LangChain users to hold ``client.session()``. Over HTTP the same default works,
  because terminals belong to the token's identity, not to the MCP session (§18);
- nothing is left running: the driver snapshots every process under it (the stdio
  server, its fork server, shells, the background job) and reports any still alive
  after the client closed; the test checks the same processes again from outside,
  since an orphaned server would be re-parented away from the suite's own leak check.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

pytest.importorskip("mcp")

from dsh_terminal_core.kernel.harness import Harness

from ..helpers import full_access
from .test_mcp_http import TOKEN_A, http_server

ROOT = Path(__file__).parents[2]
LANGCHAIN_VENV = ROOT / ".venv-langchain"
LANGCHAIN_PYTHON = LANGCHAIN_VENV / "bin" / "python"
DRIVER = Path(__file__).with_name("langchain_driver.py")
# The server command a LangChain user writes: the absolute console script of our venv.
DSH_TERMINAL = Path(sys.executable).parent / "dsh-terminal"
# A driver run takes 1-5 s (most of it importing LangChain and starting servers).
DRIVER_BOUND_S = 90
FLOW = ["terminal_open", "terminal_send", "terminal_read", "terminal_list", "terminal_send"]
FLOW += ["job_output", "terminal_send", "terminal_close"]

ProcessId = tuple[int, int]


@pytest.fixture(scope="module")
def langchain_python() -> Path:
    """The adapters' interpreter, or a skip saying why it cannot be used.

    Checked once per module: the environment is built by ``install.sh --test`` and
    only read here, never installed into from the tests.
    """
    if not LANGCHAIN_PYTHON.exists():
        pytest.skip(
            f"{LANGCHAIN_VENV} is missing: './scripts/install.sh --test' builds it (it needs "
            "network access to PyPI; when that install fails these tests skip)"
        )
    probe = subprocess.run(
        [str(LANGCHAIN_PYTHON), "-c", "import langchain_mcp_adapters.client"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(
            f"{LANGCHAIN_VENV} cannot import langchain_mcp_adapters ({last}); rerun "
            "'./scripts/install.sh --test' with network access"
        )
    return LANGCHAIN_PYTHON


def _start_time(pid: int) -> int | None:
    """Start time in clock ticks of a live, non-zombie ``pid`` (the driver's identity)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = data[data.rindex(")") + 2 :].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def still_running(processes: list[list[int]]) -> list[ProcessId]:
    """Those of the driver's ``[pid, start time]`` pairs alive now, checked from outside."""
    return [(pid, started) for pid, started in processes if _start_time(pid) == started]


def _kill_tree(pid: int) -> None:
    """Kill a hung driver and everything under it (the stdio server is in its own session)."""
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(pid)
        for process in [*root.children(recursive=True), root]:
            with contextlib.suppress(psutil.Error):
                process.kill()


async def run_in_langchain_env(python: Path, *argv: str, cwd: Path | None = None) -> str:
    """Run ``python argv...``; return its stdout, failing with its stderr on an error or hang.

    On a hang the whole tree is killed: the stdio server the adapter started sits in a
    session of its own, out of reach of the driver's process group.
    """
    process = await anyio.open_process(
        [str(python), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,
    )
    out, err = bytearray(), bytearray()

    async def drain(stream: anyio.abc.ByteReceiveStream | None, into: bytearray) -> None:
        assert stream is not None
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError):
            async for chunk in stream:
                into.extend(chunk)

    try:
        with anyio.fail_after(DRIVER_BOUND_S):
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, process.stdout, out)
                tg.start_soon(drain, process.stderr, err)
                await process.wait()
    finally:
        if process.returncode is None:
            _kill_tree(process.pid)
            await process.wait()
        await process.aclose()
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    assert process.returncode == 0, f"exit {process.returncode}\n{stdout}\n--- stderr ---\n{stderr}"
    return stdout


async def run_driver(python: Path, config: dict[str, Any]) -> dict[str, Any]:
    """Run the driver with ``config``; return its JSON result (failing on a crash or hang)."""
    stdout = await run_in_langchain_env(python, str(DRIVER), json.dumps(config))
    lines = stdout.strip().splitlines()
    assert lines, "the driver printed nothing"
    result: dict[str, Any] = json.loads(lines[-1])
    assert "crash" not in result, result["crash"]
    return result


def stdio_config(workspace: Path, scenario: str) -> dict[str, Any]:
    """The adapter starts ``dsh-terminal mcp`` itself, with the suite's environment.

    The environment is passed whole so the suite's run marker reaches the shells and
    its leak check counts them.
    """
    command = [str(DSH_TERMINAL), "mcp", "--sandbox", "danger-full-access"]
    command += ["--workspace", str(workspace)]
    return {
        "scenario": scenario,
        "transport": "stdio",
        "command": command,
        "cwd": str(workspace),
        "env": dict(os.environ),
    }


def http_config(url: str, scenario: str) -> dict[str, Any]:
    return {"scenario": scenario, "transport": "http", "url": url, "token": TOKEN_A}


def steps_by_tool(result: dict[str, Any]) -> list[tuple[str, str]]:
    return [(step["tool"], step["status"]) for step in result["steps"]]


async def expected_tools(workspace: Path) -> list[str]:
    """The tools this installation serves, in order: what the adapter must have loaded."""
    async with Harness(config=full_access(str(workspace))) as h:
        return [schema["name"] for schema in h.tool_schemas()]


def assert_session_flow(result: dict[str, Any], tools: list[str]) -> None:
    """The whole flow through a held ``client.session()``, and every schema converted."""
    assert result["versions"]["mcp"].startswith("1."), result["versions"]  # the mcp<2 pin
    assert result["protocolVersion"] == "2025-11-25"
    assert result["serverName"] == "dsh-terminal"
    assert result["tools"] == tools
    failed = {
        name: (entry["error"], entry["strictError"])
        for name, entry in result["schemas"].items()
        if entry["error"] or entry["strictError"]
    }
    assert failed == {}, f"schemas LangChain could not convert: {failed}"

    steps = result["steps"]
    assert [step["tool"] for step in steps] == FLOW, steps
    opened, echoed, read, listed, background, job, foreign, closed = steps
    for step in (opened, echoed, read, listed, background, job, closed):
        assert step["status"] == "success", step
    sid = opened["structured"]["sessionId"]
    assert echoed["structured"]["viewport"] == "hi\n"
    assert echoed["structured"]["waitReason"] == "stdin_read"
    assert echoed["structured"]["exitCode"] == 0
    assert "hi" in echoed["text"]
    assert "echo hi" in read["structured"]["text"]
    assert [s["sessionId"] for s in listed["structured"]["sessions"]] == [sid]
    assert background["structured"]["kind"] == "background"
    assert job["structured"]["jobId"] == background["structured"]["jobId"]
    assert job["structured"]["status"] == "completed"
    assert "bg-done" in job["structured"]["output"]
    # A tool error reaches the model as an error ToolMessage, not an exception.
    assert foreign["status"] == "error"
    assert foreign["text"].startswith("error [NO_SESSION]:"), foreign
    assert closed["structured"] == {"closed": True}


async def test_langchain_session_over_stdio(tmp_path: Path, langchain_python: Path) -> None:
    tools = await expected_tools(tmp_path)
    result = await run_driver(langchain_python, stdio_config(tmp_path, "session"))
    assert_session_flow(result, tools)
    # The driver saw the server, its fork server and the shell (and the job's sleep when
    # a snapshot caught it)...
    seen = result["processesSeen"]
    shell_pid = result["steps"][0]["structured"]["pid"]
    assert shell_pid in {pid for pid, _ in seen}, seen
    assert len(seen) >= 3, seen
    # ...and every one of them ended when the client closed, from inside and outside.
    assert result["leftRunning"] == []
    assert still_running(seen) == []


async def test_langchain_session_over_http(tmp_path: Path, langchain_python: Path) -> None:
    tools = await expected_tools(tmp_path)
    async with http_server(tmp_path) as server:
        result = await run_driver(langchain_python, http_config(server.url, "session"))
        assert_session_flow(result, tools)
        # terminal_close took the shell down with its tree while the server runs on.
        shell_pid = result["steps"][0]["structured"]["pid"]
        with anyio.fail_after(10):
            while shell_pid in {p.pid for p in psutil.Process(server.pid).children(True)}:
                await anyio.sleep(0.05)
    # The driver started nothing; the server (ours) is SIGTERMed by http_server and the
    # suite's leak check proves its tree is gone.
    assert result["processesSeen"] == []


async def test_langchain_default_client_over_stdio_answers_no_session(
    tmp_path: Path, langchain_python: Path
) -> None:
    """Expected, not a defect: without ``client.session()`` each call is a new server.

    The terminal ``terminal_open`` started lived in the first call's server, which
    closed it with its process tree when the adapter disconnected; the next call's
    server never heard of it. docs/mcp.md tells LangChain users to hold a session.
    """
    result = await run_driver(langchain_python, stdio_config(tmp_path, "stateless"))
    assert steps_by_tool(result) == [
        ("terminal_open", "success"),
        ("terminal_send", "error"),
        ("terminal_list", "success"),
        ("terminal_close", "error"),
    ], result["steps"]
    opened, sent, listed, closed = result["steps"]
    sid = opened["structured"]["sessionId"]
    assert sent["text"].startswith(f"error [NO_SESSION]: no terminal session '{sid}'")
    assert listed["structured"] == {"sessions": []}
    assert closed["text"].startswith("error [NO_SESSION]:")
    assert not psutil.pid_exists(opened["structured"]["pid"])
    assert result["leftRunning"] == []


async def test_langchain_default_client_over_http_keeps_the_identity_s_terminals(
    tmp_path: Path, langchain_python: Path
) -> None:
    """Over HTTP the default works: terminals belong to the token, not the MCP session."""
    async with http_server(tmp_path) as server:
        result = await run_driver(langchain_python, http_config(server.url, "stateless"))
    assert steps_by_tool(result) == [
        ("terminal_open", "success"),
        ("terminal_send", "success"),
        ("terminal_list", "success"),
        ("terminal_close", "success"),
    ], result["steps"]
    opened, sent, listed, _ = result["steps"]
    assert sent["structured"]["viewport"] == "hi\n"
    sid = opened["structured"]["sessionId"]
    assert [s["sessionId"] for s in listed["structured"]["sessions"]] == [sid]


def readme_langchain_snippet() -> str:
    """The MCP page's LangChain snippet (docs/mcp.md), as a user would copy it."""
    page = (ROOT / "docs" / "mcp.md").read_text()
    section = page.split("## From agent frameworks", 1)[1].split("\n## ", 1)[0]
    blocks = [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]
    (snippet,) = [b for b in blocks if "langchain_mcp_adapters" in b]
    return snippet


def processes_in(workspace: Path) -> list[str]:
    """Processes started in ``workspace`` or naming it: the snippet's server and shells.

    The snippet passes no environment, so the suite's run marker never reaches its
    shells; what identifies them is the workspace they were started in.
    """
    found = []
    for process in psutil.process_iter(["pid", "cwd", "cmdline"]):
        cwd, cmdline = process.info["cwd"] or "", process.info["cmdline"] or []
        named = cwd.startswith(str(workspace)) or any(str(workspace) in arg for arg in cmdline)
        if named and process.pid != os.getpid():
            found.append(f"{process.pid} {' '.join(cmdline)}")
    return found


async def test_the_readme_langchain_snippet_runs(tmp_path: Path, langchain_python: Path) -> None:
    """The MCP page's snippet, copied as is, with this machine's paths and no confinement."""
    args = '"args": ["mcp", "--workspace", "/home/me/project"]'
    snippet = readme_langchain_snippet()
    assert snippet.count(args) == 1 and "/absolute/path/to/dsh-terminal" in snippet
    workspace = tmp_path / "project"
    workspace.mkdir()
    ours = f'"args": ["mcp", "--sandbox", "danger-full-access", "--workspace", "{workspace}"]'
    script = tmp_path / "snippet.py"
    script.write_text(
        snippet.replace(args, ours).replace("/absolute/path/to/dsh-terminal", str(DSH_TERMINAL))
    )
    stdout = await run_in_langchain_env(langchain_python, str(script), cwd=tmp_path)
    assert "'text': 'hi\\n[stdin_read: waiting for input; exit code 0]'" in stdout, stdout
    with anyio.fail_after(10):
        while processes_in(workspace):
            await anyio.sleep(0.05)
