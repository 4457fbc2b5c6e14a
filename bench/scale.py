#!/usr/bin/env python3
"""A thousand terminals through the tools, under the default sandbox (SPEC §24).

    python3 bench/scale.py                      # 1,000 sessions; writes bench/results/scale.json
    python3 bench/scale.py --sessions 200       # a smaller run
    python3 bench/scale.py --unconfined         # the same without bubblewrap
    python3 bench/scale.py --no-cgroups         # the same without the owner limits' cgroups
    python3 bench/run.py --groups scale         # the same scenario as run.py's ``scale`` group

One harness with every installed plugin, one agent. The sandbox is the default one
(``workspace-write``, one bubblewrap per shell) whenever bubblewrap works here, else
unconfined (said in the result). Steps, each timed:

1. open N sessions with ``terminal_open``, 64 opens in flight at a time;
2. the harness's RSS and open descriptors before and after, per session;
3. one warm-up ``echo`` per session, all at once (reported, not counted below);
4. 20 rounds of ``terminal_send`` ``echo <token>`` in every session, all sessions at
   once (a session's sends follow one another: one send at a time per terminal): each
   result must be ``stdin_read`` with exit code 0 and exactly its own token as its
   viewport, or it counts as wrong; p50/p95/p99 over all N x 20 sends;
5. ``agent.dispose()`` — the owner going away closes every session;
6. proof that nothing is left: no process carrying the owner's marker, none of the
   sessions' PTY children alive, no child of the fork server; the check is repeated
   after the harness closed.

The provider raises the soft ``RLIMIT_NOFILE`` to the hard limit when the harness starts;
the result reports the limit in force.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import json
import os
import resource
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from _stats import load_average, machine, summarize  # noqa: E402

from dsh_terminal_bash.census import shells_of  # noqa: E402
from dsh_terminal_core.kernel.errors import DisposeError  # noqa: E402
from dsh_terminal_core.kernel.harness import Harness  # noqa: E402
from dsh_terminal_core.provider.census import still_running  # noqa: E402
from dsh_terminal_core.provider.forkclient import fork_server  # noqa: E402

__all__ = ["DEFAULT_SESSIONS", "OPEN_CONCURRENCY", "SENDS", "markdown", "run", "save_report"]

DEFAULT_SESSIONS = 1000
OPEN_CONCURRENCY = 64
SENDS = 20
# The figures SPEC §24 holds the run to.
P99_LIMIT_MS = 250.0
DISPOSE_LIMIT_S = 5.0


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} missing from /proc/self/status")


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _fork_server_children() -> list[int]:
    pid = fork_server().pid
    if pid is None:
        return []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    alive = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child.pid)
    return alive


def _leftovers(owner: str, identities: list[tuple[int, float]]) -> dict[str, list[int]]:
    return {
        "marked": shells_of(owner),
        "pty_children": still_running(identities),
        "fork_server_children": _fork_server_children(),
    }


async def _wait_clean(
    owner: str, identities: list[tuple[int, float]], wait: float
) -> dict[str, list[int]]:
    """What is left now; if anything, look again for up to ``wait`` s (no exit event for
    processes that are not ours)."""
    deadline = time.monotonic() + wait
    left = _leftovers(owner, identities)
    while any(left.values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        left = _leftovers(owner, identities)
    return left


def _config(
    sessions: int, workspace: str, unconfined: bool, cgroups: bool = True
) -> dict[str, Any]:
    policy: dict[str, Any] = {"workspace_root": workspace}
    if unconfined:
        policy["mode"] = "danger-full-access"
    config: dict[str, Any] = {
        "sandbox-policy": policy,
        "terminals": {"max_sessions_per_owner": sessions + 16},
    }
    if not cgroups:
        config["owner-limits"] = {"cgroups": "off"}
    return config


def _sandbox_works(h: Harness) -> tuple[bool, str | None]:
    try:
        sandbox = h.ctx.sandbox
    except Exception as exc:  # no sandbox plugin loaded
        return False, f"no sandbox service: {exc}"
    if sandbox.available():
        return True, None
    return False, str(sandbox.unavailable_reason)


async def run(
    sessions: int = DEFAULT_SESSIONS,
    *,
    owner: str | None = None,
    unconfined: bool = False,
    sends: int = SENDS,
    concurrency: int = OPEN_CONCURRENCY,
    profile_dispose: str | None = None,
    cgroups: bool = True,
) -> dict[str, Any]:
    """Run the scale scenario once; return its figures (see the module docstring).
    ``cgroups=False``: without the owner limits' cgroups (``cgroups = "off"``)."""
    owner = owner or f"bench-scale-{os.getpid()}"
    with tempfile.TemporaryDirectory(prefix="dsh-scale-") as workspace:
        h = Harness(config=_config(sessions, workspace, unconfined, cgroups))
        await h.start()
        try:
            if not unconfined:
                works, why = _sandbox_works(h)
                if not works:
                    await h.aclose()
                    unconfined = True
                    h = Harness(config=_config(sessions, workspace, True, cgroups))
                    await h.start()
                    print(f"bubblewrap does not work here ({why}): running unconfined")
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
            return await _scenario(
                h, owner, sessions, sends, concurrency, unconfined, nofile, profile_dispose
            )
        finally:
            with contextlib.suppress(Exception):
                await h.aclose()


async def _scenario(
    h: Harness,
    owner: str,
    sessions: int,
    sends: int,
    concurrency: int,
    unconfined: bool,
    nofile: tuple[int, int],
    profile_dispose: str | None,
) -> dict[str, Any]:
    warm = h.create_agent(owner)  # the same marker, so a leak check finds its shells too
    opened = await h.call_tool(warm, "terminal_open", {"type": "shell"})
    if opened.is_error:
        raise RuntimeError(f"terminal_open failed: {opened.text}")
    await warm.dispose()  # first-use imports, the fork server, the guardian
    agent = h.create_agent(owner)
    gc.collect()
    rss_before, fds_before = _status_kib("VmRSS"), _fd_count()

    limit = asyncio.Semaphore(concurrency)
    open_samples: list[float] = []
    open_errors: list[str] = []
    ids: list[str] = []
    identities: list[tuple[int, float]] = []

    async def open_one() -> None:
        async with limit:
            began = time.perf_counter()
            result = await h.call_tool(agent, "terminal_open", {"type": "shell"})
            open_samples.append(time.perf_counter() - began)
        if result.is_error:
            open_errors.append(result.text)
            return
        ids.append(result.value["sessionId"])
        with contextlib.suppress(psutil.Error):
            pid = int(result.value["pid"])
            identities.append((pid, psutil.Process(pid).create_time()))

    print(f"opening {sessions} sessions, {concurrency} at a time ...", flush=True)
    wall = time.perf_counter()
    await asyncio.gather(*(open_one() for _ in range(sessions)))
    open_wall = time.perf_counter() - wall
    print(f"  {len(ids)} open in {open_wall:.1f} s ({len(open_errors)} failed)", flush=True)
    await asyncio.sleep(0.2)
    gc.collect()
    rss_after, fds_after = _status_kib("VmRSS"), _fd_count()

    nonce = secrets.token_hex(3)
    wrong: list[dict[str, Any]] = []
    reasons: dict[str, int] = {}

    async def send_one(sid: str, token: str, samples: list[float], count: bool) -> None:
        began = time.perf_counter()
        result = await h.call_tool(
            agent, "terminal_send", {"sessionId": sid, "text": f"echo {token}"}
        )
        samples.append(time.perf_counter() - began)
        value = result.value if not result.is_error else None
        reason = value["waitReason"] if value is not None else "error"
        if count:
            reasons[reason] = reasons.get(reason, 0) + 1
        ok = value is not None and (reason, value["viewport"], value.get("exitCode")) == (
            "stdin_read",
            f"{token}\n",
            0,
        )
        if count and not ok and len(wrong) < 20:
            wrong.append({"session": sid, "token": token, "result": result.text[:300]})
        elif count and not ok:
            wrong.append({})

    warm_samples: list[float] = []
    await asyncio.gather(*(send_one(sid, f"w-{nonce}-{sid}", warm_samples, False) for sid in ids))

    # Every session's i-th send, apart: a send's latency is set by the round it is in.
    rounds: list[list[float]] = [[] for _ in range(sends)]

    async def drive(sid: str) -> None:
        for i in range(sends):
            await send_one(sid, f"t-{nonce}-{sid}-{i}", rounds[i], True)

    print(f"{len(ids)} x {sends} sends ...", flush=True)
    with _SendPhase(shells_of(owner)) as phase:
        cpu = time.process_time()
        wall = time.perf_counter()
        await asyncio.gather(*(drive(sid) for sid in ids))
        send_wall = time.perf_counter() - wall
        send_cpu = time.process_time() - cpu
    samples = [latency for latencies in rounds for latency in latencies]
    send_stats = summarize(samples)
    gc.collect()
    fds_after_sends = _fd_count()
    print(
        f"  p50 {send_stats['p50_ms']:.0f} ms, p99 {send_stats['p99_ms']:.0f} ms, "
        f"{len(wrong)} wrong, in {send_wall:.1f} s",
        flush=True,
    )

    print("agent.dispose() ...", flush=True)
    dispose_errors: list[str] = []
    profiler: Any = None
    if profile_dispose is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    cpu = time.process_time()
    wall = time.perf_counter()
    try:
        await agent.dispose()
    except DisposeError as exc:
        dispose_errors = [repr(e)[:300] for e in exc.errors][:20]
    dispose_s = time.perf_counter() - wall
    dispose_cpu = time.process_time() - cpu
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_dispose)
    at_dispose = _leftovers(owner, identities)
    print(f"  {dispose_s:.2f} s; left: { {k: len(v) for k, v in at_dispose.items()} }", flush=True)
    await h.aclose()
    after_close = await _wait_clean(owner, identities, 5.0)

    n = max(1, len(ids))
    return {
        "sessions": sessions,
        "opened": len(ids),
        "open_errors": open_errors[:20],
        "open_error_count": len(open_errors),
        "open_concurrency": concurrency,
        "sandbox": "danger-full-access" if unconfined else "workspace-write (bubblewrap)",
        "nofile": list(nofile),
        "open_wall_s": open_wall,
        "open": summarize(open_samples),
        "rss_before_mib": rss_before / 1024,
        "rss_after_mib": rss_after / 1024,
        "rss_per_session_kib": (rss_after - rss_before) / n,
        "fds_before": fds_before,
        "fds_after": fds_after,
        "fds_per_session": (fds_after - fds_before) / n,
        "fds_per_session_after_sends": (fds_after_sends - fds_before) / n,
        "warm_send": summarize(warm_samples),
        "sends_per_session": sends,
        "send": send_stats,
        "send_wall_s": send_wall,
        "send_cpu_ms_per_send": send_cpu * 1000 / max(1, len(samples)),
        "send_phase": phase.summary(send_wall),
        "send_rounds": [summarize(latencies) for latencies in rounds],
        "wait_reasons": reasons,
        "wrong": len(wrong),
        "wrong_examples": [w for w in wrong if w][:20],
        "dispose_s": dispose_s,
        "dispose_cpu_s": dispose_cpu,
        "dispose_ms_per_session": dispose_s * 1000 / n,
        "dispose_errors": dispose_errors,
        "left_at_dispose": at_dispose,
        "left_after_close": after_close,
        "clean": not any(at_dispose.values()) and not any(after_close.values()),
    }


class _SendPhase:
    """Where the harness's time goes while the sends run: on a CPU, waiting for one, in GC.

    The loop's thread's scheduler statistics (``/proc/thread-self/schedstat``: time on a
    CPU, time runnable in a run queue) and every garbage-collection pass, timed by
    generation through ``gc.callbacks``. With every session sending, the p50 of a send is
    about the number of sessions times the harness's wall time per send (each session
    has one send in flight), so these say what sets it. Beside them, what the sessions'
    processes took (their ``schedstat``) and how long the CPUs sat idle (``/proc/stat``):
    a loop waiting for a CPU while CPUs sit idle is the scheduler's placement, not a lack
    of CPU.
    """

    def __init__(self, shells: list[int]) -> None:
        self._passes: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._began = 0.0
        self._shells = shells

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self._passes[info["generation"]].append(time.perf_counter() - self._began)

    @staticmethod
    def _schedstat(path: str = "/proc/thread-self/schedstat") -> tuple[int, int]:
        with open(path) as stat:
            on_cpu, waiting, _slices = stat.read().split()
        return int(on_cpu), int(waiting)

    def _shells_schedstat(self) -> dict[int, tuple[int, int]]:
        """Each session process's time on a CPU and runnable-waiting, in ns, by pid."""
        seen = {}
        for pid in self._shells:
            with contextlib.suppress(OSError, ValueError):
                seen[pid] = self._schedstat(f"/proc/{pid}/schedstat")
        return seen

    @staticmethod
    def _idle_ticks() -> int:
        """Clock ticks all CPUs spent idle since boot (``/proc/stat``: idle + iowait)."""
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
        return int(fields[4]) + int(fields[5])

    def __enter__(self) -> _SendPhase:
        self._shells_start = self._shells_schedstat()
        self._idle_start = self._idle_ticks()
        self._start = self._schedstat()
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self._on_gc)
        self._end = self._schedstat()
        self._idle_end = self._idle_ticks()
        self._shells_end = self._shells_schedstat()

    def summary(self, wall_s: float) -> dict[str, Any]:
        on_cpu = (self._end[0] - self._start[0]) / 1e9
        waiting = (self._end[1] - self._start[1]) / 1e9
        shells = [
            (end[0] - self._shells_start[pid][0], end[1] - self._shells_start[pid][1])
            for pid, end in self._shells_end.items()
            if pid in self._shells_start
        ]
        return {
            "wall_s": wall_s,
            "loop_on_cpu_s": on_cpu,
            "loop_runnable_waiting_s": waiting,
            "shells_on_cpu_s": sum(run for run, _ in shells) / 1e9,
            "shells_runnable_waiting_s": sum(wait for _, wait in shells) / 1e9,
            "shell_processes": len(shells),
            "cpus_idle_s": (self._idle_end - self._idle_start) / os.sysconf("SC_CLK_TCK"),
            "gc": {
                str(generation): {
                    "passes": len(passes),
                    "total_ms": sum(passes) * 1000,
                    "max_ms": max(passes, default=0.0) * 1000,
                }
                for generation, passes in self._passes.items()
            },
        }


def targets(result: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    """(target, measured, limit, met) for the figures SPEC §24 names."""
    p99 = float(result["send"]["p99_ms"])
    return [
        (
            "all open",
            f"{result['opened']}/{result['sessions']}",
            "all",
            result["opened"] == result["sessions"],
        ),
        ("sends wrong", str(result["wrong"]), "0", result["wrong"] == 0),
        ("send p99 (ms)", f"{p99:.0f}", f"<= {P99_LIMIT_MS:.0f}", p99 <= P99_LIMIT_MS),
        (
            "owner's dispose (s)",
            f"{result['dispose_s']:.2f}",
            f"<= {DISPOSE_LIMIT_S:.0f}",
            result["dispose_s"] <= DISPOSE_LIMIT_S and not result["dispose_errors"],
        ),
        ("nothing left running", "clean" if result["clean"] else "LEFT", "clean", result["clean"]),
    ]


def markdown(result: dict[str, Any]) -> str:
    send = result["send"]
    lines = [
        f"{result['sessions']} sessions, {result['sandbox']}, opens {result['open_concurrency']} "
        f"at a time, RLIMIT_NOFILE {result['nofile'][0]}",
        "",
        "| opened | open wall s | open p50 ms | open p99 ms | sends | p50 ms | p95 ms | p99 ms "
        "| wrong | RSS KiB/session | fds/session (after sends) | dispose s | ms/session |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| {result['opened']} | {result['open_wall_s']:.1f} | {result['open']['p50_ms']:.0f} | "
        f"{result['open']['p99_ms']:.0f} | {send['n']} | {send['p50_ms']:.0f} | "
        f"{send['p95_ms']:.0f} | {send['p99_ms']:.0f} | {result['wrong']} | "
        f"{result['rss_per_session_kib']:.1f} | {result['fds_per_session']:.2f} / "
        f"{result['fds_per_session_after_sends']:.2f} | "
        f"{result['dispose_s']:.2f} | {result['dispose_ms_per_session']:.1f} |",
        "",
    ]
    phase = result.get("send_phase")
    if phase is not None:
        gc_passes = ", ".join(
            f"generation {generation} {row['passes']} passes {row['total_ms']:.0f} ms "
            f"(longest {row['max_ms']:.1f})"
            for generation, row in phase["gc"].items()
        )
        by_round = [row["p50_ms"] for row in result.get("send_rounds", [])]
        spread = (
            f"; the rounds' p50 from {min(by_round):.0f} to {max(by_round):.0f} ms"
            if by_round
            else ""
        )
        lines += [
            f"While the sends ran ({phase['wall_s']:.2f} s{spread}): the loop's thread on a CPU "
            f"{phase['loop_on_cpu_s']:.2f} s, runnable and waiting for one "
            f"{phase['loop_runnable_waiting_s']:.2f} s; garbage collection: {gc_passes}. "
            f"The sessions' {phase.get('shell_processes', 0)} processes on a CPU "
            f"{phase.get('shells_on_cpu_s', 0.0):.2f} s; the {os.cpu_count()} CPUs idle "
            f"{phase.get('cpus_idle_s', 0.0):.2f} s in all.",
            "",
        ]
    lines += [
        "| target | measured | limit | result |",
        "|---|---:|---|---|",
    ]
    for name, measured, limit, met in targets(result):
        lines.append(f"| {name} | {measured} | {limit} | {'met' if met else '**missed**'} |")
    return "\n".join(lines)


def save_report(path: Path, started: str, load: list[float], name: str, result: object) -> None:
    """Write ``result`` under ``name`` with when, on what and under which load it ran."""
    report = {
        "started": started,
        "machine": machine(),
        "load": {"start": load, "end": list(load_average())},
        name: result,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS)
    parser.add_argument("--sends", type=int, default=SENDS, help="sends per session")
    parser.add_argument("--unconfined", action="store_true", help="danger-full-access shells")
    parser.add_argument(
        "--json", help="where to save the result (default bench/results/scale.json)"
    )
    parser.add_argument("--profile-dispose", help="cProfile the dispose into this file")
    parser.add_argument(
        "--no-cgroups", action="store_true", help='owner limits off (cgroups = "off")'
    )
    args = parser.parse_args(argv)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    load = list(load_average())
    result = asyncio.run(
        run(
            args.sessions,
            unconfined=args.unconfined,
            sends=args.sends,
            profile_dispose=args.profile_dispose,
            cgroups=not args.no_cgroups,
        )
    )
    path = Path(args.json) if args.json else BENCH / "results" / "scale.json"
    save_report(path, started, load, "scale", result)
    print()
    print(markdown(result))
    print(f"\nresults: {path}")
    return 0 if result["clean"] and not result["open_error_count"] else 1


if __name__ == "__main__":
    sys.exit(main())
