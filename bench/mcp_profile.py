#!/usr/bin/env python3
"""Where the MCP server's CPU goes per ``terminal_send``: the tools, the SDK, the wire, ours.

    python3 bench/mcp_profile.py                    # 20,000 sends over stdio, 8,000 over HTTP
    python3 bench/mcp_profile.py --transports stdio --sends 5000

SPEC §24 asks the server to spend at most 2x (stdio) and 3x (HTTP) the CPU of the same
call in-process, and, if the SDK's own layers dominate, to say so with the profile. This
is that profile. Each server runs under ``bench/_cpu_sampler.py`` (on-CPU samples only:
a wait in ``epoll`` costs nothing), is driven by the SDK's own client exactly as in
``bench/mcp_transports.py``, and is sampled only over the measured sends (the start-up
and 200 warm-up sends left out). The in-process call is measured beside it in this
process, over the same number of sends.

Each sample goes to the layer of the innermost frame that belongs to one, looking from
the sampled line outwards up to the event loop's callback entry: the tools (every
``dsh_*`` module outside ``dsh_terminal_core.mcp``), our stdio wire, our other MCP
modules, the MCP SDK (``mcp``, ``mcp_types``, OpenTelemetry), pydantic and anyio (used
here by the SDK alone), the HTTP stack (uvicorn, h11, starlette); what is left is the
asyncio loop itself (``select``, the scheduling of callbacks). ``ms per send`` is the
layer's share of the server's measured CPU per send; the last line is what the server
would spend if our own MCP modules cost nothing, against the in-process call.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from mcp_transports import SERVER, Contender, in_process, over_http, over_stdio  # noqa: E402

_WARMUP = 200
_OURS = ("our stdio wire", "our MCP modules")


def layer_of(frame: str) -> str | None:
    """The layer a ``file:function:line`` frame belongs to, or None for the loop and the rest."""
    path = frame.rsplit(":", 2)[0]
    if "/dsh_terminal_core/mcp/stdio.py" in path:
        return "our stdio wire"
    if "/dsh_terminal_core/mcp/" in path:
        return "our MCP modules"
    if "/dsh_" in path:
        return "the tools (the in-process call)"
    for package, layer in (
        ("mcp/", "MCP SDK"),
        ("mcp_types/", "MCP SDK"),
        ("opentelemetry/", "MCP SDK"),
        ("pydantic", "pydantic (for the SDK)"),
        ("anyio/", "anyio (for the SDK)"),
        ("uvicorn/", "HTTP stack (uvicorn, h11, starlette)"),
        ("h11/", "HTTP stack (uvicorn, h11, starlette)"),
        ("starlette/", "HTTP stack (uvicorn, h11, starlette)"),
        ("sse_starlette/", "HTTP stack (uvicorn, h11, starlette)"),
    ):
        if f"site-packages/{package}" in path:
            return layer
    return None


def layers(stacks: Path) -> dict[str, int]:
    """Samples per layer from a folded-stacks file."""
    counts: collections.Counter[str] = collections.Counter()
    for line in stacks.read_text().splitlines():
        stack, count = line.rsplit(" ", 1)
        owner = "asyncio event loop (select, callbacks)"
        for frame in reversed(stack.split(";")):
            if "asyncio/events.py:_run:" in frame or "asyncio/base_events.py:_run_once:" in frame:
                break
            if (layer := layer_of(frame)) is not None:
                owner = layer
                break
        counts[owner] += int(count)
    return dict(counts)


async def _profile(name: str, sends: int, floor_ms: float) -> None:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-mcpprof-") as workspace:
        out = Path(workspace) / "stacks.txt"
        server = [SERVER[0], str(BENCH / "_cpu_sampler.py"), str(out), *SERVER[1:]]
        connect = over_stdio if name == "stdio" else over_http
        os.environ["DSH_SAMPLE_PAUSED"] = "1"
        try:
            async with connect(workspace, server) as contender:
                for _ in range(_WARMUP):
                    await contender.send()
                assert contender.server is not None
                contender.server.send_signal(signal.SIGUSR2)
                await contender.batch(sends)
                contender.server.send_signal(signal.SIGUSR2)
        finally:
            del os.environ["DSH_SAMPLE_PAUSED"]
        # The server writes its samples as it exits, once our end of the connection closed.
        await asyncio.to_thread(contender.server.wait, 30)
        counts = layers(out)
    _print(name, contender, sends, counts, floor_ms)


def _print(
    name: str, contender: Contender, sends: int, counts: dict[str, int], floor_ms: float
) -> None:
    total = sum(counts.values())
    server_ms = contender.server_cpu_s * 1000 / sends
    print(
        f"\n{name}: server CPU {server_ms:.3f} ms per send ({server_ms / floor_ms:.2f}x the "
        f"in-process {floor_ms:.3f} ms), {total} samples over {sends} sends"
    )
    print("| layer | share | ms per send |\n|---|---:|---:|")
    for layer, count in sorted(counts.items(), key=lambda item: -item[1]):
        print(f"| {layer} | {100 * count / total:.1f} % | {server_ms * count / total:.3f} |")
    ours = sum(counts.get(layer, 0) for layer in _OURS) / total
    rest = server_ms * (1 - ours)
    print(f"without our MCP modules: {rest:.3f} ms per send, {rest / floor_ms:.2f}x in-process")


async def run(transports: list[str], sends: dict[str, int]) -> None:
    async with in_process() as local:
        for _ in range(_WARMUP):
            await local.send()
        await local.batch(max(sends.values()))
    floor_ms = local.client_cpu_s * 1000 / len(local.wall)
    for name in transports:
        await _profile(name, sends[name], floor_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transports", default="stdio,http")
    parser.add_argument("--sends", type=int, default=None, help="sends per transport")
    args = parser.parse_args(argv)
    transports = [name for name in args.transports.split(",") if name]
    unknown = set(transports) - {"stdio", "http"}
    if unknown:
        parser.error(f"unknown transports: {sorted(unknown)}")
    sends = {"stdio": 20000, "http": 8000}
    if args.sends is not None:
        sends = dict.fromkeys(sends, args.sends)
    asyncio.run(run(transports, sends))
    return 0


if __name__ == "__main__":
    sys.exit(main())
