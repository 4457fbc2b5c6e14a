#!/usr/bin/env python3
"""Benchmark the stack beside a raw PTY floor, that floor with proofs, and pexpect.

    python3 bench/run.py            # full sizes; writes bench/results/latest.json
    python3 bench/run.py --quick    # tiny sizes; writes bench/results/quick.json

Every (scenario group, contender) pair runs in its own worker process, so memory
figures are not coloured by earlier groups. After each worker the runner checks that no
shell it started is left (processes whose environment carries ``DSH_SHELL=1`` and this
run's owner id), kills any it finds, and fails the run if there were some.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_terminal_bash.census import shells_of

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _report import evaluate_targets, markdown  # noqa: E402
from _stats import load_average, machine  # noqa: E402

SCROLLBACK_CAP = 4 * 1024 * 1024
PLAN: list[tuple[str, tuple[str, ...]]] = [
    ("latency", ("raw", "proofs", "pexpect", "service", "tool")),
    # no proofs row: one look per 15 MB send adds nothing to its cost per MB
    ("throughput", ("raw", "pexpect", "service", "tool")),
    ("concurrent", ("raw", "proofs", "service", "tool")),  # pexpect is synchronous
    ("idle_memory", ("raw", "proofs", "pexpect", "service", "tool")),
    # recording + audit log off and on, interleaved in one worker (bench/_records.py)
    ("records", ("tool",)),
    # SPEC §24: 1,000 sessions under the default sandbox, through the tools (scale.py)
    ("scale", ("tool",)),
    # SPEC §24 "MCP overhead": the server's CPU per send over stdio and HTTP vs in-process
    ("mcp", ("tool",)),
    # SPEC §24: tool-level CPU per echo vs proofs, interleaved in one worker (_cpu_ratio.py)
    ("cpu", ("tool",)),
    # SPEC §32: echo p50 and CPU per send for bash, zsh and fish, interleaved (shells.py)
    ("shells", ("service",)),
]
NOTES = [
    "raw: ptyprocess + bash + the same marker protocol, asyncio reader on the master fd, "
    "64 KiB reads, settles when the newest bytes end with marker + prompt",
    "proofs: raw + the prompt tier's proofs, no framework: at the write a drain of the "
    "master, tcgetpgrp and the shell's run time; at marker + prompt no unread input "
    "(TIOCGPTPEER, poll, FIONREAD), the shell's group in the foreground, the shell in a "
    "new pselect6 wait on the terminal (schedstat, syscall, mem, fd 0, schedstat; kept "
    "files, pread) and no output pending (poll on the master); a failed look is repeated "
    "1 ms later and on new output (retried sends counted); REPL sends as raw",
    "pexpect: expect_exact on marker end + prompt; delaybeforesend=None, "
    "delayafterclose=0, delayafterterminate=1 ms (its fastest settings)",
    "service: ctx.terminals spawn / start_send + await op.done / kill",
    "tool: call_tool terminal_open / terminal_send / terminal_close",
    "records: the tool level with recording.dir and audit.file set vs not, interleaved "
    "blocks in one process; CPU includes the recorder's writer thread",
    "throughput runs with scrollback_max_bytes=4 MiB and scrollback_lines=1,000,000 so the "
    "byte cap is the one that binds",
    "mcp: bench/mcp_transports.py — terminal_send echo in-process, over stdio and over "
    "streamable HTTP (SDK clients, servers in subprocesses), interleaved rounds; server CPU "
    "is the server process's user+sys",
    "scale: bench/scale.py — N sessions opened with terminal_open 64 at a time under the "
    "default sandbox (workspace-write, bubblewrap; unconfined where bubblewrap does not "
    "work), 20 echo sends per session with all sessions at once, then agent.dispose()",
    "cpu: bench/_cpu_ratio.py — a proofs session, a tool session and a pexpect child open "
    "at once in one worker, echo hi in interleaved blocks (60 x 100 sends each, which "
    "contender goes first rotating, after 50 warm-up sends each); the CPU target reads the "
    "ratio of the medians of per-block CPU per send, the latency target tool p50 / pexpect "
    "p50 over all sends, so a noise spike hits the contenders alike",
]


# -- worker -----------------------------------------------------------------------------


def _driver(name: str, owner: str, group: str) -> Any:
    if name == "raw":
        from _raw import RawDriver

        return RawDriver(owner)
    if name == "proofs":
        from _proofs import ProofsDriver

        return ProofsDriver(owner)
    if name == "pexpect":
        from _pexpect import PexpectDriver

        return PexpectDriver(owner)
    from _stack import ServiceDriver, ToolDriver

    bash: dict[str, Any] = {}
    if group == "throughput":
        bash = {"scrollback_max_bytes": SCROLLBACK_CAP, "scrollback_lines": 1_000_000}
    cls = ServiceDriver if name == "service" else ToolDriver
    return cls(owner, **bash)


async def _worker(group: str, name: str, owner: str, quick: bool) -> dict[str, Any]:
    from _scenarios import FULL, QUICK, run_group

    sizes = QUICK if quick else FULL
    if group == "records":
        from _records import run_records

        return await run_records(owner, quick)
    if group == "scale":  # its own harness: the default sandbox, room for every session
        import scale

        return await scale.run(sizes["scale_sessions"], owner=owner)
    if group == "mcp":  # its own harness and servers (bench/mcp_transports.py)
        import mcp_transports

        rounds, batch = (2, 10) if quick else (10, 40)
        return await mcp_transports.run(rounds, batch, warmup=5 if quick else 10)
    if group == "shells":  # the three shell backends in this one worker, interleaved
        from shells import run_shells

        return await run_shells(owner, quick)
    if group == "cpu":  # both contenders in this one worker, interleaved
        from _cpu_ratio import run_cpu

        return await run_cpu(owner, quick)
    driver = _driver(name, owner, group)
    start = getattr(driver, "start", None)
    if start is not None:
        await start()
    return await run_group(group, driver, sizes)


def worker_main(args: argparse.Namespace) -> int:
    run = _worker(args.group, args.driver, args.owner, args.quick)
    if args.profile:
        import cProfile

        with cProfile.Profile() as profile:
            result = asyncio.run(run)
        profile.dump_stats(args.profile)
    else:
        result = asyncio.run(run)
    Path(args.out).write_text(json.dumps(result), encoding="utf-8")
    return 0


# -- leak check -------------------------------------------------------------------------


def _sweep(owner: str, wait: float = 5.0) -> list[int]:
    """Wait for this run's shells to go; kill and return the ones that stayed."""
    deadline = time.monotonic() + wait
    left = shells_of(owner)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = shells_of(owner)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return left


# -- runner -----------------------------------------------------------------------------


def _wait_for_load(max_load: float, max_wait: float) -> None:
    deadline = time.monotonic() + max_wait
    while True:
        one = load_average()[0]
        if one < max_load:
            print(f"load {one:.2f} < {max_load}: starting", flush=True)
            return
        if time.monotonic() >= deadline:
            print(f"load still {one:.2f} after {max_wait:.0f} s: starting anyway", flush=True)
            return
        print(f"load {one:.2f} >= {max_load}: waiting", flush=True)
        time.sleep(min(20.0, max(1.0, deadline - time.monotonic())))


def _run_worker(
    group: str, driver: str, owner: str, quick: bool, timeout: float, profile_dir: str | None
) -> tuple[dict[str, Any] | None, str | None]:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-") as tmp:
        out = Path(tmp) / "result.json"
        argv = [sys.executable, str(Path(__file__).resolve()), "--worker", group, driver]
        argv += ["--owner", owner, "--out", str(out)] + (["--quick"] if quick else [])
        if profile_dir is not None:
            argv += ["--profile", str(Path(profile_dir) / f"{group}-{driver}.prof")]
        proc = subprocess.Popen(argv, start_new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, f"timed out after {timeout:.0f} s"
        if code != 0:
            return None, f"worker exited with {code}"
        return json.loads(out.read_text(encoding="utf-8")), None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test)")
    parser.add_argument("--json", help="where to save results (default: bench/results/...)")
    group_names = ", ".join(g for g, _ in PLAN)
    parser.add_argument("--groups", help=f"comma-separated subset of: {group_names}")
    parser.add_argument(
        "--drivers", help="comma-separated subset of: raw, proofs, pexpect, service, tool"
    )
    parser.add_argument("--max-load", type=float, help="wait until the 1-minute load is below")
    parser.add_argument("--load-wait", type=float, default=1200, help="give up waiting after s")
    parser.add_argument(
        "--profile-dir", help="run each worker under cProfile and save GROUP-DRIVER.prof here"
    )
    parser.add_argument("--worker", nargs=2, metavar=("GROUP", "DRIVER"), help=argparse.SUPPRESS)
    parser.add_argument("--owner", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        args.group, args.driver = args.worker
        return worker_main(args)

    if args.max_load is not None:
        _wait_for_load(args.max_load, args.load_wait)
    if args.profile_dir:
        Path(args.profile_dir).mkdir(parents=True, exist_ok=True)
    groups = set(args.groups.split(",")) if args.groups else {g for g, _ in PLAN}
    drivers = set(args.drivers.split(",")) if args.drivers else None
    owner = f"bench-{os.getpid()}"
    timeout = 180.0 if args.quick else 1800.0
    report: dict[str, Any] = {
        "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "quick": args.quick,
        "owner": owner,
        "machine": machine(),
        "load": {"start": list(load_average())},
        "scrollback_cap": SCROLLBACK_CAP,
        "notes": NOTES,
        "scenarios": {},
        "errors": [],
        "leaks": [],
    }
    scenarios: dict[str, dict[str, Any]] = report["scenarios"]
    for group, contenders in PLAN:
        if group not in groups:
            continue
        for driver in contenders:
            if drivers is not None and driver not in drivers:
                continue
            print(f"[{group}] {driver} ...", flush=True)
            began = time.perf_counter()
            result, error = _run_worker(group, driver, owner, args.quick, timeout, args.profile_dir)
            leaked = _sweep(owner)
            if leaked:
                report["leaks"].append({"group": group, "driver": driver, "pids": leaked})
                print(f"  LEAK: shells left running: {leaked}", flush=True)
            if error is not None:
                report["errors"].append({"group": group, "driver": driver, "error": error})
                print(f"  ERROR: {error}", flush=True)
                continue
            assert result is not None
            if group == "latency":
                for scenario, entry in result.items():
                    scenarios.setdefault(scenario, {})[driver] = entry
            else:
                scenarios.setdefault(group, {})[driver] = result
            print(f"  done in {time.perf_counter() - began:.1f} s", flush=True)
    report["load"]["end"] = list(load_average())
    report["targets"] = evaluate_targets(scenarios, SCROLLBACK_CAP)
    default = "quick.json" if args.quick else "latest.json"
    path = Path(args.json) if args.json else BENCH / "results" / default
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print()
    print(markdown(report))
    print(f"\nresults: {path}")
    return 1 if report["errors"] or report["leaks"] else 0


if __name__ == "__main__":
    sys.exit(main())
