#!/usr/bin/env python3
"""The ssh consumer side by side with its baselines, in one run against one throwaway sshd.

    python3 bench/ssh_run.py                  # 200 round trips per row, 10 open pairs
    python3 bench/ssh_run.py --quick          # 20 round trips, 3 open pairs (smoke)
    python3 bench/ssh_run.py --rounds 500 --opens 20 --json /tmp/ssh.json

Rows (each the same ``echo hi``, wall time per round trip, p50/p95):

* ``ssh_run`` — the tool over an open ssh session (remote shell, prompt protocol);
* ``ssh one-shot`` — ``ssh -o ControlPath=<socket> host echo hi`` as a new client
  process per call over an already authenticated master: the cheapest way to run one
  remote command without a persistent session;
* ``terminal_send`` — the local terminal tool on a local shell: the floor a remote
  round trip is compared with.

Then ``ssh_open`` for a host the agent has no connection to (starts a master: key
exchange and authentication) against a second ``ssh_open`` to the same host (reuses the
master). CPU is this process plus its reaped children (user + sys) per operation; the
sshd side is not counted. The server is started on 127.0.0.1 with throwaway keys and
stopped at the end; nothing is left running.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

from _stats import load_average, machine, percentile  # noqa: E402

from tests.ssh.sshd import running_sshd  # noqa: E402


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _row(name: str, walls: list[float], cpu: float) -> dict[str, Any]:
    ms = [w * 1000 for w in walls]
    return {
        "row": name,
        "n": len(ms),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "cpu_ms_per_op": cpu * 1000 / max(1, len(ms)),
    }


def _stop_master(master: subprocess.Popen[bytes], client: list[str], host: str) -> None:
    """Stop this benchmark's ControlMaster; never leave it running.

    The master is asked to exit through its control socket (``ssh -O exit``), then
    terminated, then killed, each wait bounded: on a loaded machine a master given only
    SIGTERM was seen still running 10 s later.
    """
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        subprocess.run(
            [*client, "-O", "exit", host],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
            check=False,
        )
    for stop in (master.terminate, master.kill):
        with contextlib.suppress(subprocess.TimeoutExpired):
            master.wait(5)
            return
        stop()
    master.wait()


async def _timed(rounds: int, once: Any) -> tuple[list[float], float]:
    walls: list[float] = []
    cpu0 = _cpu()
    for _ in range(rounds):
        start = time.perf_counter()
        await once()
        walls.append(time.perf_counter() - start)
    return walls, _cpu() - cpu0


async def run(rounds: int, opens: int, workdir: Path) -> dict[str, Any]:
    from dsh_terminal_core.kernel.harness import Harness

    rows: list[dict[str, Any]] = []
    with running_sshd(workdir / "sshd") as server:
        target = {
            "host": server.host,
            "port": server.port,
            "user": "root",
            "identityFile": str(server.client_key),
        }
        config = {
            "sandbox-policy": {"mode": "danger-full-access"},
            "ssh": {"known_hosts_file": str(workdir / "known_hosts")},
        }
        async with Harness(config=config) as h:
            agent = h.create_agent("bench")
            opened = await h.call_tool(agent, "ssh_open", target)
            assert not opened.is_error, opened.text
            sid = opened.value["sessionId"]

            async def ssh_run() -> None:
                r = await h.call_tool(agent, "ssh_run", {"sessionId": sid, "command": "echo hi"})
                assert r.value["output"] == "hi\n", r.value

            await ssh_run()
            rows.append(_row("ssh_run echo", *await _timed(rounds, ssh_run)))

            control = workdir / "cm"
            control.mkdir(mode=0o700)
            base = [
                "ssh",
                "-o", f"UserKnownHostsFile={workdir / 'known_hosts'}",
                "-o", "BatchMode=yes",
                "-o", f"ControlPath={control}/%C",
                "-i", str(server.client_key),
                "-p", str(server.port),
                "-l", "root",
            ]  # fmt: skip
            master = subprocess.Popen([*base, "-M", "-N", "-n", server.host])
            try:
                while not any(control.iterdir()):
                    await asyncio.sleep(0.01)

                async def one_shot() -> None:
                    proc = await asyncio.create_subprocess_exec(
                        *base, "-o", "ControlMaster=no", server.host, "echo hi",
                        stdout=asyncio.subprocess.PIPE,
                        stdin=asyncio.subprocess.DEVNULL,
                    )  # fmt: skip
                    out, _ = await proc.communicate()
                    assert out == b"hi\n", out

                await one_shot()
                rows.append(_row("ssh one-shot (ControlPath)", *await _timed(rounds, one_shot)))
            finally:
                _stop_master(master, base, server.host)

            local = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            lid = local.value["sessionId"]

            async def terminal_send() -> None:
                r = await h.call_tool(agent, "terminal_send", {"sessionId": lid, "text": "echo hi"})
                assert r.value["waitReason"] == "stdin_read", r.value

            await terminal_send()
            rows.append(_row("terminal_send echo (local)", *await _timed(rounds, terminal_send)))
            await agent.dispose()

            firsts: list[float] = []
            seconds: list[float] = []
            cpu_first = cpu_second = 0.0
            for i in range(opens):
                owner = h.create_agent(f"open-{i}")
                for bucket in (firsts, seconds):
                    cpu0, start = _cpu(), time.perf_counter()
                    r = await h.call_tool(owner, "ssh_open", target)
                    bucket.append(time.perf_counter() - start)
                    if bucket is firsts:
                        cpu_first += _cpu() - cpu0
                    else:
                        cpu_second += _cpu() - cpu0
                    assert not r.is_error, r.text
                await owner.dispose()
            rows.append(_row("ssh_open, first (new master)", firsts, cpu_first))
            rows.append(_row("ssh_open, second (reuses master)", seconds, cpu_second))
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--opens", type=int)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rounds = args.rounds or (20 if args.quick else 200)
    opens = args.opens or (3 if args.quick else 10)
    load_before = load_average()
    with tempfile.TemporaryDirectory(prefix="dsh-bench-ssh-") as tmp:
        result = asyncio.run(run(rounds, opens, Path(tmp)))
    result.update(machine=machine(), load_before=load_before, load_after=load_average())
    rows = result["rows"]
    base = next(r for r in rows if r["row"].startswith("terminal_send"))["p50_ms"]
    one_shot = next(r for r in rows if r["row"].startswith("ssh one-shot"))["p50_ms"]
    print(f"load average before/after: {load_before} / {result['load_after']}")
    print("| row | n | p50 ms | p95 ms | CPU ms/op | p50 / terminal_send | p50 / one-shot |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['row']} | {r['n']} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
            f"{r['cpu_ms_per_op']:.2f} | {r['p50_ms'] / base:.2f} | {r['p50_ms'] / one_shot:.2f} |"
        )
    first = next(r for r in rows if "first" in r["row"])["p50_ms"]
    second = next(r for r in rows if "second" in r["row"])["p50_ms"]
    print(f"second ssh_open / first: {second / first:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
