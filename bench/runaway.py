"""Another owner's sends beside a runaway owner, with cgroup limits per owner (SPEC §29.3).

    python3 bench/runaway.py                       # 10 rounds quiet, 10 with the runaway
    python3 bench/runaway.py --rounds 20 --memory 512M --pids 400
    python3 bench/runaway.py --limits off          # no owner limits: only the outer
                                                   # safety cgroup holds the runaway
    python3 bench/runaway.py --sequential          # quiet rounds first, then the runaway
    python3 bench/runaway.py --runaway-cpu off     # runaway sessions never CPU-capped

One harness, two owners. The quiet owner opens 20 shells and sends 20 concurrent
``echo tok; (exit n)`` per round, checking each result's output and exit code. First
``--rounds`` rounds on a quiet host, then the runaway owner starts a bash fork bomb in
one shell and a memory hog (a Python loop allocating 32 MiB at a time, restarted after
each OOM kill) in another, and the same rounds run while both keep going. By default
the two phases are interleaved — each round once with the runaway owner's cgroup frozen
(``cgroup.freeze``, or the v1 freezer) and once with it running — so both meet the same
load from the rest of a shared machine; ``--sequential`` runs every quiet round before
the runaway starts. Prints p50/p99 of the quiet owner's send latency for both phases
(same run, same machine) and their ratio; the target is p99 within 2x of the quiet one. Everything runs inside an
outer cgroup of the benchmark's own (3 GiB, 1,500 processes), so a containment that fails
cannot take the machine down; at the end nothing of the run is left running.

Needs root (it makes cgroups) on a host with the memory and pids controllers.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from dsh_terminal_core.kernel.agents import Agent, Notice
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.provider.cgroupfs import discover, read_text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "reliability"))

from _cgroups import cgroup_reason, outer_limit  # noqa: E402

SHELLS = 20
BOMB = "bomb() { bomb | bomb & }; bomb"
HOG = (
    "while :; do python3 -c 'a = []\nwhile True: a.append(bytearray(32 << 20))' "
    ">/dev/null 2>&1; done"
)


async def _open(h: Harness, agent: Agent) -> str:
    opened = await h.call_tool(agent, "terminal_open", {"type": "shell"})
    if opened.is_error:
        raise SystemExit(f"open failed: {opened.text}")
    return str(opened.value["sessionId"])


async def _round(h: Harness, agent: Agent, sids: list[str], tag: str) -> tuple[list[float], int]:
    """20 concurrent sends; their latencies (ms) and how many settled wrong."""

    async def one(i: int, sid: str) -> tuple[float, bool]:
        token = f"tok-{tag}-{i}"
        start = time.perf_counter()
        result = await h.call_tool(
            agent,
            "terminal_send",
            {"sessionId": sid, "text": f"echo {token}; (exit {i % 7})", "timeoutMs": 60000},
        )
        elapsed = (time.perf_counter() - start) * 1000
        value: dict[str, Any] = result.value or {}
        right = (
            not result.is_error
            and value.get("waitReason") == "stdin_read"
            and value.get("exitCode") == i % 7
            and token in str(value.get("viewport"))
        )
        return elapsed, right

    done = await asyncio.gather(*(one(i, sid) for i, sid in enumerate(sids)))
    return [ms for ms, _ in done], sum(1 for _, ok in done if not ok)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _pauser(h: Harness) -> str | None:
    """The runaway owner's ``cgroup.freeze`` (v2) or ``freezer.state`` (v1), if any."""
    plan = h.ctx.owner_limits.plan()
    host = discover()
    if plan is None:
        return None
    if host.unified is not None and host.unified.mount in plan.bases:
        found = glob.glob(os.path.join(plan.bases[host.unified.mount], "o*-runaway"))
        if found:
            return os.path.join(found[0], "cgroup.freeze")
    freezer = host.legacy.get("freezer")
    if freezer is not None and freezer.mount in plan.bases:
        found = glob.glob(os.path.join(plan.bases[freezer.mount], "o*-runaway"))
        if found:
            return os.path.join(found[0], "freezer.state")
    return None


def _pause(path: str, on: bool) -> None:
    v2 = path.endswith("cgroup.freeze")
    with open(path, "w") as file:
        file.write(("1" if on else "0") if v2 else ("FROZEN" if on else "THAWED"))


async def _start_runaway(h: Harness, runaway: Agent, only: str | None) -> list[str]:
    bomb, hog = await _open(h, runaway), await _open(h, runaway)
    for sid, name, text in ((hog, "hog", HOG), (bomb, "bomb", BOMB)):
        if only in (None, name):
            await h.call_tool(
                runaway, "terminal_send", {"sessionId": sid, "text": text, "timeoutMs": 500}
            )
    return [bomb, hog]


async def run(args: argparse.Namespace) -> int:
    with outer_limit(memory=3 << 30, pids=1500) as outer:
        cap = None if args.runaway_cpu == "off" else int(args.runaway_cpu)
        limits: dict[str, Any] = {"parent": outer, "memory_max": args.memory,
                                  "pids_max": args.pids, "runaway_cpu_percent": cap}
        if args.limits == "off":
            # No owner limits, but still cgroups under the outer safety cgroup: its 3 GiB
            # and 1,500 processes are then all that holds the runaway.
            limits = {"parent": outer, "memory_max": "max", "pids_max": "max",
                      "runaway_cpu_percent": None}
        config = {
            "sandbox-policy": {"mode": "danger-full-access"},
            "terminals": {"max_sessions_per_owner": SHELLS},
            "owner-limits": limits,
        }
        async with Harness(config=config) as h:
            quiet, runaway = h.create_agent("quiet"), h.create_agent("runaway")
            told: list[Notice] = []
            runaway.on_notice(told.append)
            sids = list(await asyncio.gather(*(_open(h, quiet) for _ in range(SHELLS))))
            await _round(h, quiet, sids, "warm")
            quiet_ms: list[float] = []
            loaded_ms: list[float] = []
            wrong = 0
            if args.sequential:
                for r in range(args.rounds):
                    ms, bad = await _round(h, quiet, sids, f"q{r}")
                    quiet_ms, wrong = quiet_ms + ms, wrong + bad
            runaway_sids = await _start_runaway(h, runaway, args.only)
            wanted = {"bomb": {"pids"}, "hog": {"memory"}}.get(args.only or "", {"memory", "pids"})
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if args.limits == "off":
                    await asyncio.sleep(5)  # no notice comes: give the runaway time to grow
                    break
                if {n.data["limit"] for n in told} >= wanted:
                    break
                await asyncio.sleep(0.1)
            pauser = None if args.sequential else _pauser(h)
            peak_pids = 0
            plan = h.ctx.owner_limits.plan()
            owner_pids = None
            if plan is not None:
                mount = discover().serving("pids").mount  # type: ignore[union-attr]
                owner_pids = glob.glob(os.path.join(plan.bases[mount], "o*-runaway"))[0]
            for r in range(args.rounds):
                if pauser is not None:
                    # Interleaved: the same round with the runaway frozen, so both phases
                    # meet the same load from the rest of the machine.
                    _pause(pauser, True)
                    try:
                        ms, bad = await _round(h, quiet, sids, f"q{r}")
                    finally:
                        _pause(pauser, False)
                    quiet_ms, wrong = quiet_ms + ms, wrong + bad
                    await asyncio.sleep(0.2)
                ms, bad = await _round(h, quiet, sids, f"r{r}")
                loaded_ms, wrong = loaded_ms + ms, wrong + bad
                if owner_pids is not None:
                    text = read_text(os.path.join(owner_pids, "pids.current")) or "0"
                    peak_pids = max(peak_pids, int(text))
            for sid in runaway_sids:
                await h.call_tool(runaway, "terminal_close", {"sessionId": sid})
    kinds = sorted({f"{n.data['limit']}" for n in told})
    q99, r99 = _p(quiet_ms, 0.99), _p(loaded_ms, 0.99)
    how = "sequential" if pauser is None else "interleaved, quiet rounds with the runaway frozen"
    print(f"limits: {args.limits} (memory_max {args.memory}, pids_max {args.pids}, "
          f"runaway_cpu_percent {args.runaway_cpu}); "
          f"{SHELLS} shells x {args.rounds} rounds per phase ({how}); "
          f"runaway: {args.only or 'bomb and hog'}")
    print("| phase | sends | p50 ms | p99 ms |")
    print("|---|---|---|---|")
    print(f"| quiet | {len(quiet_ms)} | {statistics.median(quiet_ms):.1f} | {q99:.1f} |")
    print(f"| runaway beside | {len(loaded_ms)} | {statistics.median(loaded_ms):.1f} | {r99:.1f} |")
    print(f"p99 ratio runaway/quiet: {r99 / q99:.2f}x (target <= 2x: "
          f"{'met' if r99 <= 2 * q99 else 'MISSED'})")
    print(f"wrong settlements: {wrong}; runaway owner told: {kinds}; "
          f"its peak pids.current seen: {peak_pids}")
    return 1 if wrong else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--memory", default="512M")
    parser.add_argument("--pids", type=int, default=400)
    parser.add_argument("--limits", choices=("on", "off"), default="on")
    parser.add_argument("--sequential", action="store_true",
                        help="all quiet rounds first, then all rounds beside the runaway")
    parser.add_argument("--only", choices=("bomb", "hog"), help="run one half of the runaway")
    parser.add_argument("--runaway-cpu", default="10",
                        help="runaway_cpu_percent: 1-100, or 'off' for no cap (default 10)")
    args = parser.parse_args()
    reason = cgroup_reason()
    if reason is not None:
        print(f"skipped: {reason}")
        return 0
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
