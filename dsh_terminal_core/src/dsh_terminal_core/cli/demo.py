"""``dsh-terminal demo``: a narrated tour of the terminal tools on this machine.

Every step is a real tool call through the harness, printed with the model-facing text
it returned. The tour ends by proving that no process it started is still alive.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap
import time
from typing import Any

import psutil

from ..kernel.agents import Agent
from ..kernel.harness import Harness
from ..provider.census import processes_with_env, still_running
from ..sandbox.bwrap import BwrapConfig, BwrapSandbox

__all__ = ["run_demo"]

# What the tour uses, and the distribution that brings each piece.
REQUIRED_TOOLS = {
    "terminal_open": "dsh-tool-terminal",
    "terminal_send": "dsh-tool-terminal",
    "job_output": "dsh-terminal-core",
    "pty_open": "dsh-pty-session",
}
REQUIRED_BACKENDS = {"shell": "dsh-terminal-bash"}


def missing_advice(harness: Harness) -> str | None:
    """Name exactly what the tour needs and is absent, with the packages that bring it.

    Only what is really missing is named, so the advice never sends anyone to install a
    package that is already there.
    """
    tools = set(harness.ctx.tools.names())
    backends = set(harness.ctx.terminals.list_backends()) if harness.ctx.has("terminals") else set()
    missing: dict[str, list[str]] = {}
    for tool, distribution in REQUIRED_TOOLS.items():
        if tool not in tools:
            missing.setdefault(distribution, []).append(f"tool {tool}")
    for kind, distribution in REQUIRED_BACKENDS.items():
        if kind not in backends:
            missing.setdefault(distribution, []).append(f"backend {kind!r}")
    if not missing:
        return None
    parts = [f"{', '.join(what)} (from {dist})" for dist, what in missing.items()]
    return (
        f"the tour needs {'; '.join(parts)}, which are not installed; install them with: "
        f"pip install {' '.join(missing)}"
    )


class DemoFailed(Exception):
    """A step did not behave as the tour expects; the message says which."""


def _say(text: str = "") -> None:
    print(text, flush=True)


def _indent(text: str, head: int = 8, tail: int = 4) -> str:
    """Indent a tool result for the reader, eliding the middle of long ones.

    A line the tool itself put in place of omitted output (``[… N lines ... omitted``)
    stays visible: it is what the model is told about the missing middle.
    """
    lines = (text.rstrip("\n") or "(empty)").split("\n")
    if len(lines) > head + tail + 1:
        kept = [i for i, line in enumerate(lines) if line.startswith("[… ")][:1]
        shown = [*lines[:head]]
        for index in kept:
            if head <= index < len(lines) - tail:
                shown += [f"… ({index - head} more lines) …", lines[index]]
                head = index + 1
        shown += [f"… ({len(lines) - head - tail} more lines) …", *lines[-tail:]]
        lines = shown
    return textwrap.indent("\n".join(lines), "    │ ")


def _choose_mode(requested: str) -> tuple[str, str]:
    if requested != "auto":
        return requested, "chosen with --sandbox"
    sandbox = BwrapSandbox(BwrapConfig())
    if sandbox.available():
        return (
            "workspace-write",
            "bubblewrap works here, so shells may write only the workspace and a /tmp of "
            "their own, see no host process and have no network",
        )
    return (
        "danger-full-access",
        f"bubblewrap is not usable: {sandbox.unavailable_reason}; the demo runs unconfined "
        f"and says so — for the confined modes, {sandbox.remedy}",
    )


class Tour:
    def __init__(self, harness: Harness, agent: Agent) -> None:
        self.harness = harness
        self.agent = agent
        self.pids: set[tuple[int, float]] = set()
        self.step = 0

    async def call(self, name: str, args: dict[str, Any], *, expect_error: bool = False) -> Any:
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        _say(f"  → {name}({shown})")
        result = await self.harness.call_tool(self.agent, name, args)
        _say(_indent(result.text))
        if result.is_error and not expect_error:
            raise DemoFailed(f"{name} failed: {result.text}")
        self._note_processes(result.value)
        return result.value

    def _note_processes(self, value: Any) -> None:
        if not isinstance(value, dict) or "pid" not in value:
            return
        try:
            root = psutil.Process(value["pid"])
            for proc in [root, *root.children(recursive=True)]:
                self.pids.add((proc.pid, proc.create_time()))
        except psutil.Error:
            pass

    def section(self, title: str) -> None:
        self.step += 1
        _say()
        _say(f"{self.step}. {title}")

    def expect(self, condition: bool, what: str) -> None:
        if not condition:
            raise DemoFailed(what)
        _say(f"    ✓ {what}")


async def _tour(tour: Tour, workspace: str) -> None:
    tour.section("Open a persistent bash session")
    opened = await tour.call("terminal_open", {"type": "shell", "name": "demo"})
    sid = opened["sessionId"]

    tour.section("State persists across sends: cwd and an exported variable")
    await tour.call(
        "terminal_send",
        {
            "sessionId": sid,
            "text": "mkdir -p project && cd project && export DEMO_GREETING='hello from the demo'",
        },
    )
    value = await tour.call(
        "terminal_send", {"sessionId": sid, "text": 'pwd; echo "$DEMO_GREETING"'}
    )
    tour.expect(
        os.path.join(workspace, "project") in value["viewport"], "the cwd survived to the next send"
    )
    tour.expect("hello from the demo" in value["viewport"], "the exported variable survived too")
    tour.expect(
        value["waitReason"] == "stdin_read", "settled on the prompt (stdin_read), not on silence"
    )

    tour.section("Exit codes come back with the prompt")
    value = await tour.call("terminal_send", {"sessionId": sid, "text": "false"})
    tour.expect(value["exitCode"] == 1, "`false` reports exit code 1")

    tour.section("Drive a Python REPL; its variables live between sends")
    value = await tour.call("terminal_send", {"sessionId": sid, "text": "python3 -q -i"})
    tour.expect(
        value["waitReason"] == "stdin_read", "the REPL's read was detected exactly (stdin_read)"
    )
    await tour.call("terminal_send", {"sessionId": sid, "text": "answer = 6 * 7"})
    started = time.perf_counter()
    value = await tour.call("terminal_send", {"sessionId": sid, "text": "answer + 0.5"})
    took = (time.perf_counter() - started) * 1000
    tour.expect("42.5" in value["viewport"], f"the REPL kept `answer` (round trip {took:.0f} ms)")
    await tour.call("terminal_send", {"sessionId": sid, "text": "exit()"})

    tour.section("Interrupt a long command with SIGINT")
    value = await tour.call(
        "terminal_send", {"sessionId": sid, "text": "sleep 30", "run_in_background": True}
    )
    job = value["jobId"]
    # Give bash a moment to read the line and start sleep, as a person would before Ctrl-C.
    value = await tour.call("job_output", {"jobId": job, "wait": True, "timeoutMs": 300})
    tour.expect(value["status"] == "running", "sleep is running in the background")
    await tour.call("terminal_signal", {"sessionId": sid, "signal": "SIGINT"})
    value = await tour.call("job_output", {"jobId": job, "wait": True, "timeoutMs": 10000})
    tour.expect(
        value["status"] != "running" and "exit code 130" in value.get("result", ""),
        "sleep was interrupted (exit code 130)",
    )

    tour.section("A background send, collected with job_output")
    value = await tour.call(
        "terminal_send",
        {
            "sessionId": sid,
            "text": "for i in 1 2 3; do echo tick $i; sleep 0.3; done",
            "run_in_background": True,
        },
    )
    value = await tour.call(
        "job_output", {"jobId": value["jobId"], "wait": True, "timeoutMs": 10000}
    )
    tour.expect(
        "tick 3" in value["output"] and value["status"] == "completed",
        "all three ticks were collected",
    )

    tour.section("Long output keeps its first and last lines; the middle is paged")
    value = await tour.call("terminal_send", {"sessionId": sid, "text": "seq -f 'line %g' 8000"})
    shown = value["viewport"].split("\n")
    tour.expect(
        shown[0] == "line 1" and shown[-2] == "line 8000",
        "the first line and the last line both survived (head + tail, one line between)",
    )
    marker = next(line for line in shown if line.startswith("[… "))
    offset = int(marker.rsplit("offset=", 1)[1].split()[0])
    before = int(shown[shown.index(marker) - 1].split()[1])
    value = await tour.call("terminal_read", {"sessionId": sid, "offset": offset, "count": 3})
    tour.expect(
        (value["lineBegin"], value["lineEnd"]) == (offset, offset + 2)
        and value["text"].split("\n")[0] == f"line {before + 1}",
        f"terminal_read offset={offset} continues exactly where the head stopped",
    )

    tour.section("List sessions")
    value = await tour.call("terminal_list", {})
    tour.expect(len(value["sessions"]) == 1, "one session is open")

    tour.section("A protocol-free pty_open session, read with pty_tail")
    value = await tour.call(
        "pty_open",
        {
            "command": 'for n in one two three; do echo "line $n"; done',
            "env": {"DEMO": "it's $quoted"},
        },
    )
    pty_id = value["sessionId"]
    value = await tour.call("pty_send", {"id": pty_id, "data": 'echo "$DEMO"'})
    value = await tour.call("pty_tail", {"id": pty_id})
    tour.expect(
        "line three" in value["text"] and "it's $quoted" in value["text"],
        "the tail holds the new lines, env exported exactly",
    )
    value = await tour.call("pty_tail", {"id": pty_id})
    tour.expect(value["lines"] == 0, "a second tail resends nothing")

    if shutil.which("less"):
        tour.section("A screen session for full-screen programs, driven with named keys")
        value = await tour.call("terminal_open", {"screen": True, "rows": 8, "cols": 60})
        screen_id = value["sessionId"]
        value = await tour.call("terminal_send", {"sessionId": screen_id, "text": "seq 100 | less"})
        shown = value.get("screen") or {}
        tour.expect(shown.get("alternate") is True, "the result is the screen less drew")
        value = await tour.call("terminal_send", {"sessionId": screen_id, "keys": ["PageDown"]})
        top = ((value.get("screen") or {}).get("text") or "").split("\n")[0]
        tour.expect(top == "8", "PageDown paged on: the screen now starts at line 8")
        value = await tour.call("terminal_send", {"sessionId": screen_id, "keys": ["q"]})
        tour.expect(value["waitReason"] == "stdin_read", "q quit less; the shell waits again")
        await tour.call("terminal_close", {"sessionId": screen_id})

    tour.section("Close everything")
    await tour.call("pty_close", {"id": pty_id})
    await tour.call("terminal_close", {"sessionId": sid})
    value = await tour.call("terminal_close", {"sessionId": sid}, expect_error=True)


async def run_demo(sandbox: str = "auto") -> int:
    """Run the tour; 0 on success, 1 with a clear message otherwise."""
    if shutil.which("bash") is None or not os.path.exists("/bin/bash"):
        print("dsh-terminal demo: /bin/bash is required and was not found", file=sys.stderr)
        return 1
    mode, why = _choose_mode(sandbox)
    workspace = os.path.realpath(tempfile.mkdtemp(prefix="dsh-demo-"))
    _say("dsh-terminal demo — persistent PTY terminals for agents")
    _say(f"sandbox: {mode} ({why})")
    _say(f"workspace: {workspace} (a scratch directory, removed at the end)")
    config = {"sandbox-policy": {"mode": mode, "workspace_root": workspace}}
    tour: Tour | None = None
    try:
        async with Harness(config=config) as harness:
            _say(f"plugins: {', '.join(p.name for p in harness.plugins)}")
            advice = missing_advice(harness)
            if advice is not None:
                print(f"dsh-terminal demo: {advice}", file=sys.stderr)
                return 1
            agent_id = f"demo-agent-{os.getpid()}"
            tour = Tour(harness, harness.create_agent(agent_id))
            # Each backend's own environment marker, so the census after the harness
            # closed finds processes that left the terminals' trees too.
            markers = harness.ctx.terminals.process_markers(agent_id)
            await _tour(tour, workspace)
            await tour.agent.dispose()
        marked = {pid for marker in markers for pid in processes_with_env(marker)}
        survivors = sorted(set(still_running(tour.pids)) | marked)
        _say()
        if survivors:
            print(
                f"dsh-terminal demo: processes still alive after close: {survivors}",
                file=sys.stderr,
            )
            return 1
        _say(f"✓ all {len(tour.pids)} processes the demo started are gone; nothing left running")
        return 0
    except DemoFailed as exc:
        print(f"\ndsh-terminal demo: FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
