"""bash's ``echo`` through ``ctx.terminals`` in this tree against another checkout, same run.

```
git worktree add /tmp/base <commit> && (cd /tmp/base && ./scripts/install.sh)
python3 bench/tree_compare.py --base-python /tmp/base/.venv/bin/python --rounds 10 --sends 400
```

SPEC §32 asks that adding the zsh and fish backends not cost bash more than 5 % (latency
p50 and CPU per send). Two trees cannot share one interpreter (each has its own entry
points), so each round runs one short worker per tree, in alternating order so that
load drifts hit both alike: a bash session, warm-up sends, then ``--sends`` timed
``echo hi`` sends that must each settle ``stdin_read``. Reported per tree: the median
over rounds of the p50 latency, of the CPU per send (harness process plus shell, from
``os.times`` and psutil; the clocks tick every 10 ms, hence hundreds of sends per
round), and the ratio this tree / base.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

WORKER = r"""
import asyncio, json, os, statistics, sys, time
import psutil
from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest

async def main(sends, warmup):
    async with Harness(config={"sandbox-policy": {"mode": "danger-full-access"}}) as h:
        agent = h.create_agent("tree-compare")
        opened = await h.ctx.terminals.spawn(agent, SpawnRequest(type="shell"))
        sid = str(opened.session_id)
        shell = psutil.Process(h.ctx.terminals.get_session(agent, sid).shell_pid)

        async def send():
            op = h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo hi"))
            reason = str((await op.done).wait_reason)
            if "stdin_read" not in reason:
                raise SystemExit(f"a send settled {reason}, not stdin_read")

        for _ in range(warmup):
            await send()
        own, theirs = os.times(), shell.cpu_times()
        latencies = []
        for _ in range(sends):
            started = time.perf_counter()
            await send()
            latencies.append(time.perf_counter() - started)
        own_after, theirs_after = os.times(), shell.cpu_times()
        await h.ctx.terminals.kill(agent, sid, "benchmark")
    cpu = (own_after.user + own_after.system - own.user - own.system
           + theirs_after.user + theirs_after.system - theirs.user - theirs.system)
    print(json.dumps({"p50_ms": statistics.median(latencies) * 1000,
                      "cpu_ms_per_send": cpu / sends * 1000}))

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


def _round(python: str, sends: int, warmup: int) -> dict[str, float]:
    done = subprocess.run(
        [python, "-c", WORKER, str(sends), str(warmup)],
        capture_output=True, text=True, cwd="/tmp", check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{python}: worker failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base-python", required=True, help="the other checkout's .venv python")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--sends", type=int, default=400)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    here = str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python")
    trees = {"base": args.base_python, "this": here}
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for number in range(args.rounds):
        order = list(trees) if number % 2 == 0 else list(reversed(trees))
        for name in order:
            rounds[name].append(_round(trees[name], args.sends, args.warmup))
    medians = {
        name: {key: statistics.median(r[key] for r in results) for key in ("p50_ms", "cpu_ms_per_send")}
        for name, results in rounds.items()
    }
    for name, figures in medians.items():
        print(f"{name:5} p50 {figures['p50_ms']:.3f} ms  cpu/send {figures['cpu_ms_per_send']:.3f} ms")
    for key in ("p50_ms", "cpu_ms_per_send"):
        print(f"ratio this/base {key}: {medians['this'][key] / medians['base'][key]:.3f}")


if __name__ == "__main__":
    sys.exit(main())
