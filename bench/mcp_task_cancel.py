"""How fast ``tasks/cancel`` interrupts a send running as an MCP task (SPEC §30.2).

    .venv/bin/python bench/mcp_task_cancel.py [--runs 10]

Starts ``dsh-terminal mcp --http 127.0.0.1:0 --no-auth`` and, with the MCP SDK's client
declaring the tasks extension on 2026-07-28, per run: sends ``sleep 30.N`` (which becomes
a task after 0.5 s), finds that ``sleep`` process, sends ``tasks/cancel`` and measures

- ``gone``: from sending ``tasks/cancel`` until the ``sleep`` process no longer exists
  (polled every 0.2 ms from a thread): the command interrupted by the Ctrl-C;
- ``ack``: the ``tasks/cancel`` round trip (answered once the call has unwound);
- ``next``: the following ``echo after`` send's round trip, which must succeed.

Prints the median and the maximum of each, in milliseconds. A measurement for the
record, not a test: timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Literal

import mcp_types as types
import psutil
from mcp import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client
from pydantic import ConfigDict, Field

TASKS = "io.modelcontextprotocol/tasks"


class CreatedTask(types.Result):
    model_config = ConfigDict(populate_by_name=True, extra="allow")
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")


class TaskParams(types.RequestParams):
    task_id: str = Field(serialization_alias="taskId")


class TaskRequest(types.Request[TaskParams, str]):
    method: str
    params: TaskParams


def _pid_of(marker: str) -> int:
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] and " ".join(proc.info["cmdline"]) == marker:
            return int(proc.pid)
    raise RuntimeError(f"no process {marker!r}")


def _watch_gone(pid: int, started: list[float], gone: list[float]) -> None:
    try:
        process = psutil.Process(pid)
        while process.status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.0002)
    except psutil.NoSuchProcess:
        pass
    gone.append(time.perf_counter() - started[0])


async def run(url: str, runs: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"gone": [], "ack": [], "next": []}
    async with Client(streamable_http_client(url), extensions=[advertise(TASKS)]) as client:
        opened = await client.call_tool("terminal_open", {"type": "shell"})
        sid = opened.structured_content["sessionId"]  # type: ignore[index]
        for n in range(runs):
            marker = f"sleep 30.{n + 1}"
            created = await client.session.send_request(
                types.CallToolRequest(
                    params=types.CallToolRequestParams(
                        name="terminal_send",
                        arguments={"sessionId": sid, "text": marker, "timeoutMs": 60000},
                    )
                ),
                CreatedTask,
            )
            pid = _pid_of(marker)
            started: list[float] = []
            gone: list[float] = []
            watcher = threading.Thread(target=_watch_gone, args=(pid, started, gone))
            started.append(time.perf_counter())
            watcher.start()
            await client.session.send_request(
                TaskRequest(method="tasks/cancel", params=TaskParams(task_id=created.task_id)),
                types.Result,
            )
            found["ack"].append(time.perf_counter() - started[0])
            await asyncio.to_thread(watcher.join)
            found["gone"].append(gone[0])
            begun = time.perf_counter()
            after = await client.call_tool(
                "terminal_send", {"sessionId": sid, "text": "echo after"}
            )
            found["next"].append(time.perf_counter() - begun)
            assert not after.is_error and "after" in str(after.structured_content), after
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as workspace:
        command = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp", "--http", "127.0.0.1:0"]
        command += ["--no-auth", "--sandbox", "danger-full-access", "--workspace", workspace]
        log = Path(workspace) / "server.log"
        with log.open("w") as sink:
            server = subprocess.Popen(command, stderr=sink, stdout=sink, cwd=workspace)
        try:
            while not (match := re.search(r"listening on (\S+/mcp)", log.read_text())):
                if server.poll() is not None:
                    raise SystemExit(log.read_text())
                time.sleep(0.05)
            found = asyncio.run(run(match.group(1), runs))
        finally:
            server.terminate()
            server.wait(30)
    for name, values in found.items():
        ms = [value * 1000 for value in values]
        print(
            f"{name:5} median {statistics.median(ms):6.1f} ms   max {max(ms):6.1f} ms   (n={runs})"
        )


if __name__ == "__main__":
    main()
