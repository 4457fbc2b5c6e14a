"""What the owner limits' cgroups cost an open and a close (SPEC §24, §29.3).

    python3 bench/open_cost.py                 # 5 blocks x 8 sequential opens per mode
    python3 bench/open_cost.py --blocks 10 --per-block 10 --concurrent 16

Two harnesses side by side, unconfined, one with ``owner-limits`` as shipped (cgroups on)
and one with ``cgroups = "off"``. Blocks alternate between them (on, off, on, off ...)
so both meet the same load from the rest of a shared machine. In each block: opens one
after another, each followed by one ``echo`` (the shell is ready), then the closes one
after another; then ``--concurrent`` opens at once and their closes at once. Prints
p50/p90 of ``terminal_open`` and ``terminal_close`` per mode and their ratio. Needs root
(it makes cgroups) for the cgroups to be on; elsewhere both modes run without them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from dsh_terminal_core.kernel.agents import Agent
from dsh_terminal_core.kernel.harness import Harness

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import load_average  # noqa: E402


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _open(h: Harness, agent: Agent) -> tuple[str, float]:
    start = time.perf_counter()
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
    elapsed = (time.perf_counter() - start) * 1000
    if opened.is_error:
        raise SystemExit(f"open failed: {opened.text}")
    return str(opened.value["sessionId"]), elapsed


async def _close(h: Harness, agent: Agent, sid: str) -> float:
    start = time.perf_counter()
    closed = await h.call_tool(agent, "terminal_close", {"sessionId": sid})
    if closed.is_error:
        raise SystemExit(f"close failed: {closed.text}")
    return (time.perf_counter() - start) * 1000


async def _block(
    h: Harness, agent: Agent, per_block: int, concurrent: int, out: dict[str, list[float]]
) -> None:
    sids = []
    for _ in range(per_block):
        sid, ms = await _open(h, agent)
        out["open"].append(ms)
        result = await h.call_tool(agent, "terminal_send", {"sessionId": sid, "text": "echo ok"})
        assert not result.is_error and "ok" in str(result.value["viewport"]), result.text
        sids.append(sid)
    for sid in sids:
        out["close"].append(await _close(h, agent, sid))
    if concurrent:
        start = time.perf_counter()
        opened = await asyncio.gather(*(_open(h, agent) for _ in range(concurrent)))
        out["open_all"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await asyncio.gather(*(_close(h, agent, sid) for sid, _ in opened))
        out["close_all"].append((time.perf_counter() - start) * 1000)


async def run(args: argparse.Namespace) -> None:
    base = {"sandbox-policy": {"mode": "danger-full-access"},
            "terminals": {"max_sessions_per_owner": max(64, args.concurrent)}}
    on = {**base}
    off = {**base, "owner-limits": {"cgroups": "off"}}
    results: dict[str, dict[str, list[float]]] = {
        mode: {"open": [], "close": [], "open_all": [], "close_all": []} for mode in ("on", "off")
    }
    async with Harness(config=on) as h_on, Harness(config=off) as h_off:
        agents = {"on": h_on.create_agent("a"), "off": h_off.create_agent("a")}
        harnesses = {"on": h_on, "off": h_off}
        for mode in ("on", "off"):  # warm-up: first-use imports, the fork server
            await _block(harnesses[mode], agents[mode], 2, 0, {k: [] for k in results[mode]})
        cgroups = h_on.ctx.owner_limits.plan()
        for _ in range(args.blocks):
            for mode in ("on", "off"):
                await _block(
                    harnesses[mode], agents[mode], args.per_block, args.concurrent, results[mode]
                )
    print(f"load average {load_average()}; cgroups on: "
          f"{'yes' if cgroups and cgroups.bases else 'NO (no cgroup access here)'}; "
          f"{args.blocks} blocks x {args.per_block} sequential opens per mode, alternating; "
          f"{args.concurrent} concurrent per block")
    print("| step | cgroups on p50 / p90 ms | off p50 / p90 ms | p50 ratio |")
    print("|---|---|---|---|")
    names = {"open": "open (one at a time)", "close": "close (one at a time)",
             "open_all": f"{args.concurrent} opens at once (all done)",
             "close_all": f"{args.concurrent} closes at once (all done)"}
    for key, name in names.items():
        a, b = results["on"][key], results["off"][key]
        if not a or not b:
            continue
        a50, b50 = _p(a, 0.5), _p(b, 0.5)
        print(f"| {name} | {a50:.1f} / {_p(a, 0.9):.1f} | {b50:.1f} / {_p(b, 0.9):.1f} "
              f"| {a50 / b50:.2f}x |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--per-block", type=int, default=8)
    parser.add_argument("--concurrent", type=int, default=16)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("note: not root, so no cgroups are made: both modes run without them")
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
