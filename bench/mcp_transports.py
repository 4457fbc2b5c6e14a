"""``terminal_send`` echo over MCP: streamable HTTP vs stdio vs in-process, side by side.

    python3 bench/mcp_transports.py                # 10 rounds x 40 sends per transport
    python3 bench/mcp_transports.py --rounds 2 --batch 10  # quick look

Three contenders send the same ``echo hi`` to one shell each:

- ``in-process``: ``Harness.call_tool`` in this process (the floor for any transport);
- ``stdio``: the MCP SDK's stdio client against ``dsh-terminal mcp`` in a subprocess;
- ``http``: the SDK's streamable-HTTP client against ``dsh-terminal mcp --http
  127.0.0.1:0`` in a subprocess, with a bearer token (so the check is in the path).

Rounds interleave the contenders (a batch of each in turn), so a load spike on the
shared machine hits all three alike. Wall time per send gives p50/p95; CPU per send is
this process's CPU during the contender's batches (the client; for in-process, the
whole stack) plus, for the two servers, the server process's own user+sys over the same
batches. Results go to
``bench/results/mcp_transports.json``.

Targets (SPEC §24, "MCP overhead"): the server's CPU per send at most 2x the in-process
CPU per send over stdio and 3x over HTTP, both from the same run. ``bench/run.py``
runs this as its group ``mcp`` (contender ``tool``) and reports the same two rows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _stack import stack_config  # noqa: E402
from _stats import load_average, machine, percentile, summarize  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
SERVER = [sys.executable, "-m", "dsh_terminal_core.cli", "mcp", "--sandbox", "danger-full-access"]
_LISTENING = re.compile(rb"listening on (http://127\.0\.0\.1:\d+/mcp)")

Send = Callable[[], Awaitable[None]]

SERVER_CPU_TARGETS = {"stdio": 2.0, "http": 3.0}
"""SPEC §24: server CPU per send at most this many times the in-process CPU per send."""


class Contender:
    """One way to reach the tools: a send callable, and the pid whose CPU counts besides ours."""

    def __init__(self, name: str, send: Send, server_pid: int | None) -> None:
        self.name = name
        self.send = send
        self.server = psutil.Process(server_pid) if server_pid is not None else None
        self.wall: list[float] = []
        self.client_cpu_s = 0.0
        self.server_cpu_s = 0.0

    def server_cpu(self) -> float:
        if self.server is None:
            return 0.0
        times = self.server.cpu_times()
        return float(times.user + times.system)

    async def batch(self, count: int) -> None:
        cpu0, server0 = time.process_time(), self.server_cpu()
        for _ in range(count):
            start = time.perf_counter()
            await self.send()
            self.wall.append(time.perf_counter() - start)
        self.client_cpu_s += time.process_time() - cpu0
        self.server_cpu_s += self.server_cpu() - server0


def _check(value: Any) -> None:
    if not isinstance(value, dict) or value.get("viewport") != "hi\n":
        raise RuntimeError(f"unexpected send result: {value!r}")
    if value.get("waitReason") != "stdin_read":
        raise RuntimeError(f"send did not settle on the prompt: {value!r}")


@contextlib.asynccontextmanager
async def in_process() -> AsyncIterator[Contender]:
    from dsh_terminal_core.kernel.harness import Harness

    async with Harness(config=stack_config()) as h:
        agent = h.create_agent("bench")
        opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
        sid = opened.value["sessionId"]

        async def send() -> None:
            result = await h.call_tool(
                agent, "terminal_send", {"sessionId": sid, "text": "echo hi"}
            )
            _check(result.value)

        yield Contender("in-process", send, None)


async def _session_contender(name: str, session: Any, server_pid: int) -> Contender:
    opened = await session.call_tool("terminal_open", {"type": "shell"})
    sid = opened.structured_content["sessionId"]

    async def send() -> None:
        result = await session.call_tool("terminal_send", {"sessionId": sid, "text": "echo hi"})
        _check(result.structured_content)

    return Contender(name, send, server_pid)


@contextlib.asynccontextmanager
async def over_stdio(workspace: str, server: list[str] = SERVER) -> AsyncIterator[Contender]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # Our environment, not the SDK's default minimal one: the server must import the
    # same code as this process (PYTHONPATH of a work tree) for the comparison to hold.
    params = StdioServerParameters(
        command=server[0],
        args=[*server[1:], "--workspace", workspace],
        cwd=workspace,
        env=dict(os.environ),
    )
    before = {p.pid for p in psutil.Process().children()}
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            (process,) = [p for p in psutil.Process().children() if p.pid not in before]
            yield await _session_contender("stdio", session, process.pid)


@contextlib.asynccontextmanager
async def over_http(workspace: str, server: list[str] = SERVER) -> AsyncIterator[Contender]:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    env = dict(os.environ, DSH_MCP_TOKENS=json.dumps({TOKEN: "bench"}))
    process = await asyncio.create_subprocess_exec(
        *server,
        "--workspace",
        workspace,
        "--http",
        "127.0.0.1:0",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert process.stderr is not None
    drain: asyncio.Task[None] | None = None
    try:
        url = None
        while url is None:
            line = await asyncio.wait_for(process.stderr.readline(), 60)
            if not line:
                raise RuntimeError("the HTTP server exited before listening")
            if match := _LISTENING.search(line):
                url = match.group(1).decode()
        drain = asyncio.create_task(_drain(process.stderr))
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield await _session_contender("http", session, process.pid)
    finally:
        if process.returncode is None:
            process.terminate()
            await asyncio.wait_for(process.wait(), 30)
        if drain is not None:
            drain.cancel()


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


async def run(rounds: int, batch: int, warmup: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-mcp-") as workspace:
        async with (
            in_process() as local,
            over_stdio(workspace) as stdio,
            over_http(workspace) as http,
        ):
            contenders = [local, stdio, http]
            for contender in contenders:
                for _ in range(warmup):
                    await contender.send()
            load_before = load_average()
            for _ in range(rounds):
                for contender in contenders:
                    await contender.batch(batch)
            load_after = load_average()
    floor = percentile(local.wall, 50)
    cpu_floor = local.client_cpu_s * 1000 / len(local.wall)
    results = {}
    for contender in contenders:
        summary = summarize(contender.wall)
        summary["ratio_p50_to_in_process"] = percentile(contender.wall, 50) / floor
        sends = len(contender.wall)
        summary["client_cpu_ms_per_send"] = contender.client_cpu_s * 1000 / sends
        summary["server_cpu_ms_per_send"] = contender.server_cpu_s * 1000 / sends
        summary["cpu_ms_per_send"] = (
            summary["client_cpu_ms_per_send"] + summary["server_cpu_ms_per_send"]
        )
        # SPEC §24: what the server process spends per send, against the whole stack
        # in-process (the same tools with no transport at all), in the same run.
        summary["server_cpu_x_in_process"] = (
            summary["server_cpu_ms_per_send"] / cpu_floor if cpu_floor else float("nan")
        )
        results[contender.name] = summary
    targets = [
        {
            "transport": name,
            "measured": results[name]["server_cpu_x_in_process"],
            "limit": limit,
            "met": results[name]["server_cpu_x_in_process"] <= limit,
        }
        for name, limit in SERVER_CPU_TARGETS.items()
    ]
    return {
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_before": load_before,
        "load_after": load_after,
        "rounds": rounds,
        "batch": batch,
        "results": results,
        "targets": targets,
    }


def table(report: dict[str, Any]) -> str:
    lines = [
        "| terminal_send `echo hi` | p50 ms | p95 ms | p50 / in-process "
        "| CPU ms per send (client + server) | server CPU / in-process CPU |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    limits = {target["transport"]: target for target in report["targets"]}
    for name, row in report["results"].items():
        target = limits.get(name)
        verdict = ""
        if target is not None:
            verdict = (
                f"{row['server_cpu_x_in_process']:.2f}x (target <= {target['limit']:g}x: "
                f"{'met' if target['met'] else 'NOT met'})"
            )
        lines.append(
            f"| {name} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} | "
            f"{row['ratio_p50_to_in_process']:.2f}x | {row['cpu_ms_per_send']:.2f} "
            f"({row['client_cpu_ms_per_send']:.2f} + {row['server_cpu_ms_per_send']:.2f}) "
            f"| {verdict} |"
        )
    load = ", ".join(f"{value:.2f}" for value in report["load_before"])
    lines.append("")
    lines.append(
        f"{report['rounds']} rounds x {report['batch']} sends each, interleaved; "
        f"load average before: {load}; {report['machine']['nproc']} CPUs"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--out", default=str(BENCH / "results" / "mcp_transports.json"))
    args = parser.parse_args()
    report = asyncio.run(run(args.rounds, args.batch, args.warmup))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
