"""A send through an execution world against the same send here, in one run.

```
python3 bench/worlds.py                  # 400 echo sends per contender, interleaved rounds
python3 bench/worlds.py --sends 2000 --rounds 5
CONTAINERS_CONF=... python3 bench/worlds.py --podman-image IMAGE   # adds world-podman
CONTAINERS_CONF=... python3 bench/worlds.py --podman-image IMAGE --podman-copy  # and -copy
```

Contenders, each a harness with one session, in the same process and run:

- ``local``: ``ctx.terminals`` on this host (the ``service`` row of ``bench/run.py``);
- ``world-stdio``: the world agent in its own pid, IPC and UTS namespaces (bubblewrap),
  reached over ``dsh-terminal world --stdio`` — the path ``kubectl exec -i`` takes;
- ``world-daemon``: the same agent as a daemon, reached over its unix socket;
- ``world-podman`` (with ``--podman-image``, the workload image of
  ``deploy/worlds/Dockerfile.workload``): its daemon in a real container, reached through
  the exec relay ``podman exec -i NAME dsh-terminal world --stdio --socket ...`` — what a
  user writes for ``docker exec -i`` (its world CPU is not counted: the container's
  processes are not this host's children). SPEC §29's target: p50 within local + 0.5 ms.
  The relay hands its stdio to the daemon (:mod:`dsh_terminal_core.worlds.handoff`);
- ``world-podman-copy`` (with ``--podman-copy`` as well): a second container of the same
  image whose daemon's ``.fds`` socket is removed, so the relay copies every byte as it
  does for an older daemon — the path before the handoff, measured in the same run.

Reported per contender: ``echo`` latency p50 and p99, this harness's CPU per send
(``getrusage`` of this process: with the readiness ladder in the world, the harness
only encodes and decodes), and the world agent's CPU per send (its process tree's
``/proc`` times). SPEC §21's targets: p50 through a world at most local + 0.3 ms, and
the harness's CPU per send no more than local's. Every send must settle ``stdin_read``
with its own token; the run fails otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psutil

from dsh_terminal_core.kernel.harness import Harness
from dsh_terminal_core.registry import SendRequest, SpawnRequest, WaitReason

BWRAP = shutil.which("bwrap") or "bwrap"
NAMESPACES = [
    BWRAP, "--dev-bind", "/", "/", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
    "--die-with-parent", "--proc", "/proc",
]  # fmt: skip
AGENT = [sys.executable, "-m", "dsh_terminal_core.cli", "world"]


def _cpu_self() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _cpu_tree(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        root = psutil.Process(pid)
        total = 0.0
        for proc in [root, *root.children(recursive=True)]:
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.Error:
                continue
        return total
    except psutil.Error:
        return 0.0


@asynccontextmanager
async def _daemon(directory: Path) -> AsyncIterator[tuple[Path, int]]:
    socket_path = directory / "run" / "world.sock"
    process = subprocess.Popen(
        [
            *NAMESPACES,
            *AGENT,
            "serve",
            "--socket",
            str(socket_path),
            "--sandbox",
            "danger-full-access",
        ],
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    for line in process.stderr:
        if b"listening on" in line:
            break
    try:
        yield socket_path, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        process.stderr.close()


@asynccontextmanager
async def _podman(
    image: str | None, copy: bool = False
) -> AsyncIterator[dict[str, Any] | None]:
    """A container of ``image`` running the world daemon, and the world that reaches it
    (``copy``: one whose relay copies, the daemon's descriptor socket removed)."""
    if image is None:
        yield None
        return
    podman = shutil.which("podman") or "podman"
    name = f"bench-worlds-{os.getpid()}{'-copy' if copy else ''}"
    subprocess.run([podman, "run", "-d", "--name", name, image], check=True, capture_output=True)
    try:
        deadline = time.monotonic() + 60
        while b"listening on" not in subprocess.run(
            [podman, "logs", name], capture_output=True, check=False
        ).stderr:
            if time.monotonic() > deadline:
                raise SystemExit(f"the world daemon in {name} did not start")
            await asyncio.sleep(0.1)
        if copy:
            fds = "/run/dsh/world.sock.fds"  # what an older daemon lacks
            subprocess.run([podman, "exec", name, "rm", fds], check=True, capture_output=True)
        relay = ["dsh-terminal", "world", "--stdio", "--socket", "/run/dsh/world.sock"]
        yield {"command": [podman, "exec", "-i", name, *relay], "key": "bench"}
    finally:
        subprocess.run([podman, "rm", "-f", "-t", "0", name], capture_output=True, check=False)


async def _contender(
    name: str, world: dict[str, Any] | None, sends: int, daemon_pid: int | None = None
) -> dict[str, Any]:
    config: dict[str, Any] = {"sandbox-policy": {"mode": "danger-full-access"}}
    if world is not None:
        config["worlds"] = {"worlds": {"w": world}}
    async with Harness(config=config) as h:
        agent = h.create_agent("bench")
        opened = await h.ctx.terminals.spawn(
            agent, SpawnRequest(type="shell", world="w" if world else None)
        )
        sid = opened.session_id
        world_pid = daemon_pid
        if world is not None and "command" in world:
            process = h.ctx.worlds._links["w"]._process  # the world's command, for its CPU
            world_pid = process.pid if process is not None else None
        for _ in range(20):  # warm up
            await h.ctx.terminals.start_send(agent, sid, SendRequest(text="echo warm")).done
        latencies: list[float] = []
        wrong = 0
        cpu_before, world_before = _cpu_self(), _cpu_tree(world_pid)
        for i in range(sends):
            token = f"tok{i}"
            started = time.perf_counter()
            result = await h.ctx.terminals.start_send(
                agent, sid, SendRequest(text=f"echo {token}")
            ).done
            latencies.append(time.perf_counter() - started)
            if result.wait_reason is not WaitReason.STDIN_READ or result.viewport.strip() != token:
                wrong += 1
        cpu = _cpu_self() - cpu_before
        world_cpu = _cpu_tree(world_pid) - world_before
        await agent.dispose()
    latencies.sort()
    return {
        "contender": name,
        "wrong": wrong,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
        "harness_cpu_us": cpu / sends * 1e6,
        "world_cpu_us": world_cpu / sends * 1e6,
    }


async def main(
    sends: int, rounds: int, podman_image: str | None = None, podman_copy: bool = False
) -> int:
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-worlds-") as directory:
        async with (
            _daemon(Path(directory)) as (socket_path, daemon_pid),
            _podman(podman_image) as in_container,
            _podman(podman_image if podman_copy else None, copy=True) as copying,
        ):
            stdio = {"command": [*NAMESPACES, *AGENT, "--stdio", "--sandbox", "danger-full-access"]}
            daemon = {"socket": str(socket_path), "key": "bench"}
            contenders: list[tuple[str, dict[str, Any] | None, int | None]] = [
                ("local", None, None),
                ("world-stdio", stdio, None),
                ("world-daemon", daemon, daemon_pid),
            ]
            if in_container is not None:
                contenders.append(("world-podman", in_container, None))
            if copying is not None:
                contenders.append(("world-podman-copy", copying, None))
            for _ in range(rounds):  # interleaved, so load drift touches every contender
                for name, world, pid in contenders:
                    rows.setdefault(name, []).append(await _contender(name, world, sends, pid))
    print(
        f"{'contender':<18} {'p50 ms':>8} {'p99 ms':>8} {'harness CPU µs':>15} "
        f"{'world CPU µs':>13} {'wrong':>6}"
    )
    summary: dict[str, dict[str, float]] = {}
    for name, measured in rows.items():
        row = {
            key: statistics.median(r[key] for r in measured)
            for key in ("p50_ms", "p99_ms", "harness_cpu_us", "world_cpu_us")
        }
        row["wrong"] = sum(r["wrong"] for r in measured)
        summary[name] = row
        print(
            f"{name:<18} {row['p50_ms']:>8.3f} {row['p99_ms']:>8.3f} "
            f"{row['harness_cpu_us']:>15.1f} {row['world_cpu_us']:>13.1f} {row['wrong']:>6.0f}"
        )
    local = summary["local"]
    shown = ("world-stdio", "world-daemon", "world-podman", "world-podman-copy")
    for name in [n for n in shown if n in summary]:
        added = summary[name]["p50_ms"] - local["p50_ms"]
        ratio = summary[name]["harness_cpu_us"] / local["harness_cpu_us"]
        target = 0.5 if name.startswith("world-podman") else 0.3
        print(
            f"{name}: p50 +{added:.3f} ms over local (target <= {target}), "
            f"harness CPU {ratio:.2f}x local's (target <= 1)"
        )
    print(json.dumps({"rounds": rounds, "sends": sends, "summary": summary}))
    return 1 if any(row["wrong"] for row in summary.values()) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sends", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--podman-image", help="also measure a world in a real container of this workload image"
    )
    parser.add_argument(
        "--podman-copy",
        action="store_true",
        help="with --podman-image: also a container whose relay copies (no descriptor handoff)",
    )
    args = parser.parse_args()
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    measured = main(args.sends, args.rounds, args.podman_image, args.podman_copy)
    raise SystemExit(asyncio.run(measured))
